"""The words every page uses for energy, units, GPUs and how far a figure can be trusted (pure; the shared
vocabulary).

Defined once here, so that "kWh" never stands alone: every energy figure says which energy it is; and a GPU has
one name (`gpu_name`: its host and its index).

- **GPU energy**: what the GPUs drew (the agent's or DCGM's counters), split between jobs.
- **Server energy**: GPU energy x the server type's node overhead (CPUs, fans, network).
- **Facility energy**: server energy x the site's PUE (cooling, power distribution): what the grid
  delivered, and what operational CO2e and the electricity price are computed from.

How exact a figure is, from exact to rough, is one of `EXACTNESS`'s keys: the split methods
(apps.jobs.methods) and the findings (`FINDING_BASIS`, keyed by apps.waste.kinds' values) use them.
The pages combine the two (apps/dashboard/templatetags/glossary.py); this module imports nothing of
the apps, so that any of them may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EnergyKind(StrEnum):
    GPU = "gpu"
    SERVER = "server"
    FACILITY = "facility"


@dataclass(frozen=True)
class EnergyInfo:
    label: str  # "GPU energy"
    unit: str  # "kWh (GPU)": the unit that names its energy, for a column or a figure
    meaning: str


ENERGY: dict[EnergyKind, EnergyInfo] = {
    EnergyKind.GPU: EnergyInfo(
        "GPU energy", "kWh (GPU)", "What the GPUs drew, from their own counters, before node overhead and PUE."
    ),
    EnergyKind.SERVER: EnergyInfo(
        "Server energy", "kWh (server)", "GPU energy x the server type's node overhead (CPUs, fans, network)."
    ),
    EnergyKind.FACILITY: EnergyInfo(
        "Facility energy",
        "kWh (facility)",
        "Server energy x the site's PUE (cooling, power distribution): what the grid delivered; "
        "operational CO2e and the electricity cost are computed from it.",
    ),
}


def energy_label(kind: str) -> str:
    """`facility` -> "Facility energy (kWh)": a column's or a tile's heading."""
    return f"{ENERGY[EnergyKind(kind)].label} (kWh)"


def energy_unit(kind: str) -> str:
    """`gpu` -> "kWh (GPU)": after a figure, where the heading does not say which energy it is."""
    return ENERGY[EnergyKind(kind)].unit


def gpu_name(hostname: str, index: int) -> str:
    """`gpu-x01`, 4 -> "gpu-x01/4": a GPU's one name on every page, in every table, chart and finding."""
    return f"{hostname}/{index}"


# Who metered a GPU-hour (GpuHour.source), as the pages name it.
METERS: dict[str, str] = {"agent": "fleetwatt-agent", "dcgm": "dcgm-exporter", "estimated": "estimated"}


def meter_label(source: str) -> str:
    """`dcgm` -> "dcgm-exporter"; an unknown source as it is."""
    return METERS.get(source, source)


@dataclass(frozen=True)
class Exactness:
    words: str  # shown after the label: "whole GPU — exact"
    meaning: str  # how far to trust it (a tooltip)


EXACTNESS: dict[str, Exactness] = {
    "exact": Exactness("exact", "Measured, and nothing is shared: the figure is the meter's."),
    "close": Exactness("close", "Measured and shared by a per-process signal: within a few percent."),
    "rough": Exactness("rough", "Measured, but shared without a compute signal: take it as an indication."),
    "estimate": Exactness("estimated — not measured", "Nobody measured this part: it is inferred (see its meaning)."),
    "scheduler": Exactness("the scheduler's word", "As the scheduler's accounting recorded it."),
}


def exactness_words(exactness: str) -> str:
    """`estimate` -> "estimated — not measured"; an unknown key as it is."""
    found = EXACTNESS.get(exactness)
    return found.words if found else exactness


# How each finding's evidence was found (keys: apps.waste.kinds.FlagKind values; a test checks they match).
FINDING_BASIS: dict[str, str] = {
    "low_coverage": "exact",  # the agent's own sampled seconds
    "memory_hog": "exact",  # the agent's memory and SM samples
    "idle_allocation": "exact",  # the agent's samples, and the scheduler's allocation for unused GPUs
    "counter_reset": "exact",  # the driver's counter went backwards
    "conservation": "close",  # two meters that disagree: one of them is off
    "estimated_intensity": "estimate",
    "estimated_occupancy": "estimate",
    "failed_run": "scheduler",
    "unobserved": "estimate",
}


# An hour "sampled" for longer than 3600 s: a dcgm-exporter row counts its samples x the scrape interval, and
# an hour's range can hold a sample at both of its ends (61 samples at a 60 s interval: 3660 s); an agent's
# counter rise can likewise take in a scrape that straddles the hour's start. The ingest caps a dcgm-exporter
# row at the hour (apps/telemetry/hour.py); rows stored before that are shown capped, with this note.
SAMPLED_CAP_NOTE = (
    "Capped at the hour's 3,600 s: the samples are counted at the scrape interval, and the hour's first and "
    "last scrapes can both fall in it (61 samples at 60 s = 3,660 s)."
)
