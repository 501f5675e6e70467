"""The footprint: what a slice of the fleet used and cost, side by side (pure; the shared vocabulary).

One value type for every total the product shows, from a job-GPU-hour to a team's month: GPU energy,
GPU-hours occupied, server and facility energy, operational and embodied CO2e, money. Footprints add,
so a rollup, a report line, a finding's evidence and a dashboard tile are all sums of the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

J_PER_KWH = 3.6e6
S_PER_HOUR = 3600.0

# The columns a footprint is summed from, with the same names on job rows, their sums and job summaries.
# `occupancy_s` is stored in seconds; the footprint carries it as GPU-hours.
FOOTPRINT_COLUMNS = ("energy_j", "occupancy_s", "server_kwh", "facility_kwh", "operational_kg", "embodied_kg", "cost")


def kwh(energy_j: float) -> float:
    """Joules in kWh."""
    return energy_j / J_PER_KWH


def _add_optional(a: float | None, b: float | None) -> float | None:
    """Operational CO2e is unknown (None) where a site has no grid zone: unknown + unknown stays unknown."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


@dataclass(frozen=True)
class Footprint:
    """GPU energy (J), GPU-hours occupied, server and facility energy (kWh), CO2e (kg) and cost (in the
    site's currency). `operational_kg` is None where no hour had a grid intensity."""

    energy_j: float = 0.0
    gpu_hours: float = 0.0
    server_kwh: float = 0.0
    facility_kwh: float = 0.0
    operational_kg: float | None = None
    embodied_kg: float = 0.0
    cost: Decimal = Decimal(0)

    @property
    def gpu_kwh(self) -> float:
        """GPU energy in kWh (what the GPUs drew, before node overhead and PUE)."""
        return kwh(self.energy_j)

    @property
    def co2e_kg(self) -> float:
        """Operational plus embodied CO2e (operational counts 0 where unknown)."""
        return (self.operational_kg or 0.0) + self.embodied_kg

    def __add__(self, other: Footprint) -> Footprint:
        if not isinstance(other, Footprint):
            return NotImplemented
        return Footprint(
            energy_j=self.energy_j + other.energy_j,
            gpu_hours=self.gpu_hours + other.gpu_hours,
            server_kwh=self.server_kwh + other.server_kwh,
            facility_kwh=self.facility_kwh + other.facility_kwh,
            operational_kg=_add_optional(self.operational_kg, other.operational_kg),
            embodied_kg=self.embodied_kg + other.embodied_kg,
            cost=self.cost + other.cost,
        )

    def __sub__(self, other: Footprint) -> Footprint:
        """What is left of this footprint without a part of it (an idle line less the part nobody saw)."""
        if not isinstance(other, Footprint):
            return NotImplemented
        return self + other.scaled(-1.0)

    def scaled(self, share: float) -> Footprint:
        """A share of this footprint (a team's part of an idle line)."""
        factor = Decimal(repr(share))
        return Footprint(
            energy_j=self.energy_j * share,
            gpu_hours=self.gpu_hours * share,
            server_kwh=self.server_kwh * share,
            facility_kwh=self.facility_kwh * share,
            operational_kg=None if self.operational_kg is None else self.operational_kg * share,
            embodied_kg=self.embodied_kg * share,
            cost=self.cost * factor,
        )

    @classmethod
    def total(cls, footprints: Iterable[Footprint]) -> Footprint:
        """The footprints added up in their order (the same figures as adding them one by one: each field's sum
        is made in the same order, without a footprint made per addition)."""
        energy_j = gpu_hours = server_kwh = facility_kwh = embodied_kg = 0.0
        operational_kg: float | None = None
        cost = Decimal(0)
        for fp in footprints:
            energy_j += fp.energy_j
            gpu_hours += fp.gpu_hours
            server_kwh += fp.server_kwh
            facility_kwh += fp.facility_kwh
            operational_kg = _add_optional(operational_kg, fp.operational_kg)
            embodied_kg += fp.embodied_kg
            cost += fp.cost
        return cls(energy_j=energy_j, gpu_hours=gpu_hours, server_kwh=server_kwh, facility_kwh=facility_kwh,
                   operational_kg=operational_kg, embodied_kg=embodied_kg, cost=cost)  # fmt: skip

    @classmethod
    def from_sum_columns(
        cls, energy_j: Any, occupancy_s: Any, server_kwh: Any, facility_kwh: Any, operational_kg: Any,
        embodied_kg: Any, cost: Any,
    ) -> Footprint:  # fmt: skip
        """From a cursor's tuple of sums in FOOTPRINT_COLUMNS' order (occupancy in seconds; None: no row), as
        from_sums reads a row of them by name: for reads that take the cursor's tuples, not dicts."""
        return cls(
            energy_j=float(energy_j or 0.0), gpu_hours=float(occupancy_s or 0.0) / S_PER_HOUR,
            server_kwh=float(server_kwh or 0.0), facility_kwh=float(facility_kwh or 0.0),
            operational_kg=None if operational_kg is None else float(operational_kg),
            embodied_kg=float(embodied_kg or 0.0), cost=Decimal(cost or 0),
        )  # fmt: skip

    @classmethod
    def from_sums(cls, row: Mapping[str, Any], *, prefix: str = "") -> Footprint:
        """From a row of sums named as FOOTPRINT_COLUMNS (a `.values().annotate(**footprint_sums())` row, a
        job, a rollup period). A missing or NULL sum is zero, but operational CO2e stays unknown."""

        def num(name: str) -> float:
            return float(row.get(prefix + name) or 0.0)

        operational = row.get(prefix + "operational_kg")
        gpu_hours = row.get(prefix + "gpu_hours")
        return cls(
            energy_j=num("energy_j"),
            gpu_hours=float(gpu_hours) if gpu_hours is not None else num("occupancy_s") / S_PER_HOUR,
            server_kwh=num("server_kwh"),
            facility_kwh=num("facility_kwh"),
            operational_kg=None if operational is None else float(operational),
            embodied_kg=num("embodied_kg"),
            cost=Decimal(row.get(prefix + "cost") or 0),
        )

    def as_dict(self) -> dict[str, Any]:
        """Every figure with its unit in its name, the derived ones (GPU kWh, CO2e) included."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["energy_kwh"] = self.gpu_kwh
        out["co2e_kg"] = self.co2e_kg
        return out


class FootprintSum:
    """Footprints added up in place, one after the other: the same figures, to the last bit, as adding them with `+`
    from Footprint() in that order (each field added in the same order), without a footprint made per addition (a
    month's findings add thousands)."""

    __slots__ = ("cost", "embodied_kg", "energy_j", "facility_kwh", "gpu_hours", "operational_kg", "server_kwh")

    def __init__(self) -> None:
        self.energy_j = self.gpu_hours = self.server_kwh = self.facility_kwh = self.embodied_kg = 0.0
        self.operational_kg: float | None = None
        self.cost = Decimal(0)

    def add(self, fp: Footprint) -> None:
        self.energy_j += fp.energy_j
        self.gpu_hours += fp.gpu_hours
        self.server_kwh += fp.server_kwh
        self.facility_kwh += fp.facility_kwh
        self.operational_kg = _add_optional(self.operational_kg, fp.operational_kg)
        self.embodied_kg += fp.embodied_kg
        self.cost += fp.cost

    def footprint(self) -> Footprint:
        return Footprint(
            energy_j=self.energy_j, gpu_hours=self.gpu_hours, server_kwh=self.server_kwh,
            facility_kwh=self.facility_kwh, operational_kg=self.operational_kg, embodied_kg=self.embodied_kg,
            cost=self.cost,
        )  # fmt: skip
