"""Energy to carbon and money (pure; DESIGN section 4, the method of the SCI specification).

GPU energy x node overhead = server energy; x PUE = facility energy; x the hour's grid intensity =
operational CO2e. Embodied CO2e = the server's embodied total / its service hours / its GPUs, for each
GPU-hour a job occupied. Cost = GPU-hours x the GPU model's rate + facility kWh x the site's price.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from apps.core.units.footprint import Footprint, kwh

HOUR = timedelta(hours=1)
MONEY = Decimal("0.000001")


def money(value: float | Decimal) -> Decimal:
    """A float amount as a Decimal, to the millionth (sums of these stay exact to the cent)."""
    return Decimal(repr(float(value))).quantize(MONEY)


@dataclass(frozen=True)
class HourFactors:
    """Everything that turns one GPU-hour's energy and occupancy into a footprint."""

    overhead: float = 1.0  # node overhead factor: measured server power / summed GPU power
    pue: float = 1.0
    intensity_kg_per_kwh: float | None = None
    intensity_estimated: bool = False
    embodied_kg_per_gpu_hour: float = 0.0
    gpu_rate_per_hour: Decimal = Decimal(0)
    price_per_kwh: Decimal = Decimal(0)


def footprint(*, energy_j: float, gpu_hours: float, factors: HourFactors) -> Footprint:
    server_kwh = kwh(energy_j) * factors.overhead
    facility_kwh = server_kwh * factors.pue
    operational = facility_kwh * factors.intensity_kg_per_kwh if factors.intensity_kg_per_kwh is not None else None
    cost = money(gpu_hours * float(factors.gpu_rate_per_hour) + facility_kwh * float(factors.price_per_kwh))
    return Footprint(
        energy_j=energy_j,
        gpu_hours=gpu_hours,
        server_kwh=server_kwh,
        facility_kwh=facility_kwh,
        operational_kg=operational,
        embodied_kg=gpu_hours * factors.embodied_kg_per_gpu_hour,
        cost=cost,
    )


def sci_kg(*, operational_kg: float | None, embodied_kg: float, work_units: float | None) -> float | None:
    """Software Carbon Intensity per functional unit: a run, unless the job reported its work."""
    if operational_kg is None:
        return None
    units = work_units if work_units and work_units > 0 else 1.0
    return (operational_kg + embodied_kg) / units


def intensity_fill(
    hour: datetime,
    *,
    known: Mapping[datetime, float],
    monthly_mean: Mapping[tuple[int, int], float],
    within_hours: int,
) -> tuple[float | None, bool]:
    """The hour's intensity, or (estimated) the nearest known hour within `within_hours`, or the zone's
    mean for that month; (None, False) when the zone has no figures at all. Never 0 by default."""
    if hour in known:
        return known[hour], False
    for k in range(1, within_hours + 1):
        for candidate in (hour - k * HOUR, hour + k * HOUR):  # the earlier one wins a tie
            if candidate in known:
                return known[candidate], True
    mean = monthly_mean.get((hour.year, hour.month))
    if mean is None and monthly_mean:
        # No figure that month: the nearest month's mean.
        key = min(monthly_mean, key=lambda ym: abs((ym[0] * 12 + ym[1]) - (hour.year * 12 + hour.month)))
        mean = monthly_mean[key]
    return (mean, True) if mean is not None else (None, False)


def shift_saving_kg(
    profile: Sequence[tuple[datetime, float]], intensity: Mapping[datetime, float], *, deadline_h: int
) -> float | None:
    """Carbon-aware hint: the kg the same hourly facility energy would have saved in the cleanest window
    of the same length starting within `deadline_h` hours of the actual start (a hint, not a claim).
    None when the intensity of the run's own hours is not known."""
    if not profile:
        return None
    hours = [h for h, _ in profile]
    first, last = min(hours), max(hours)
    length_h = int((last - first) / HOUR) + 1
    if any(h not in intensity for h in hours):
        return None
    actual = sum(kwh * intensity[h] for h, kwh in profile)
    best = actual
    for shift in range(1, max(0, deadline_h - length_h) + 1):
        moved = [(h + shift * HOUR, kwh) for h, kwh in profile]
        if all(h in intensity for h, _ in moved):
            best = min(best, sum(kwh * intensity[h] for h, kwh in moved))
    return actual - best


def tdp_estimate_j(held: Sequence[tuple[float, float | None]]) -> float | None:
    """What a TDP-based tool would claim for a job: each GPU's seconds held (occupancy) x its model's thermal
    design power, summed (J). `held`: (seconds, TDP in W or None where the model has none). None where a GPU
    it held has no TDP: a guessed wattage would be a number nobody measured or configured."""
    if any(tdp is None for seconds, tdp in held if seconds > 0):
        return None
    return sum(seconds * (tdp or 0.0) for seconds, tdp in held)
