"""Flag kinds and review statuses (pure; DESIGN section 4, "Flags" and "Waste").

Defined once here: the model's choices, which kinds count as waste in the reports and on the pages,
which are raised on a GPU-hour rather than a job, and their labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class KindInfo:
    label: str
    meaning: str
    waste: bool  # counted in a team's waste total
    on_gpu_hour: bool  # raised on a GPU-hour, not on a job
    report_label: str = ""  # the line of the weekly report, for waste kinds


class FlagKind(StrEnum):
    LOW_COVERAGE = "low_coverage"
    MEMORY_HOG = "memory_hog"
    IDLE_ALLOCATION = "idle_allocation"
    COUNTER_RESET = "counter_reset"
    CONSERVATION = "conservation"
    ESTIMATED_INTENSITY = "estimated_intensity"
    ESTIMATED_OCCUPANCY = "estimated_occupancy"
    FAILED_RUN = "failed_run"
    UNOBSERVED = "unobserved"

    @property
    def info(self) -> KindInfo:
        return KIND_INFO[self]

    @property
    def label(self) -> str:
        return self.info.label


KIND_INFO: dict[FlagKind, KindInfo] = {
    FlagKind.LOW_COVERAGE: KindInfo(
        "Low Coverage", "The agent saw under 95 % of the job's GPU time: its energy is a lower bound.", False, False
    ),
    FlagKind.MEMORY_HOG: KindInfo(
        "Memory Hog",
        "Held at least 1 GiB of a GPU at under 1 % SM for 30 minutes or more.",
        True,
        False,
        "Memory hogs (GPU held, under 1 % SM)",
    ),
    FlagKind.IDLE_ALLOCATION: KindInfo(
        "Idle Allocation",
        "Had a whole GPU to itself at under 5 % SM for an hour or more, or was allocated GPUs it never ran on.",
        True,
        False,
        "Idle allocations (whole GPU, under 5 % SM)",
    ),
    FlagKind.COUNTER_RESET: KindInfo(
        "Counter Reset", "The GPU's energy counter went backwards (driver reload) in this hour.", False, True
    ),
    FlagKind.CONSERVATION: KindInfo(
        "Conservation", "Jobs + idle differ from the GPU's meter by more than 2 % in this hour.", False, True
    ),
    FlagKind.ESTIMATED_INTENSITY: KindInfo(
        "Estimated Intensity", "Some hours had no recorded grid intensity; it was filled in.", False, False
    ),
    FlagKind.ESTIMATED_OCCUPANCY: KindInfo(
        "Estimated Occupancy",
        "An older agent exports no occupancy series: this hour's GPU-hours were estimated from sampled seconds.",
        False,
        True,
    ),
    FlagKind.UNOBSERVED: KindInfo(
        "Unobserved Time",
        "Its scheduler says it held GPUs for time it was not seen on them (the agent down, a GPU without an "
        "agent, an allocated GPU it never used): that time's GPU-hours, and energy from DCGM's meter, are estimated.",
        False,
        False,
    ),
    FlagKind.FAILED_RUN: KindInfo(
        "Failed Run",
        "Its scheduler says it failed, timed out, ran out of memory or lost a node: its GPU time bought no result.",
        True,
        False,
        "Failed runs (failed, timed out, out of memory, node failure)",
    ),
}

KIND_CHOICES = [(k.value, k.label) for k in FlagKind]
WASTE_KINDS = tuple(k for k in FlagKind if k.info.waste)
GPU_HOUR_KINDS = tuple(k for k in FlagKind if k.info.on_gpu_hour)


class FlagStatus(StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    DISPUTED = "disputed"
    RESOLVED = "resolved"

    @property
    def label(self) -> str:
        return self.value.capitalize()


STATUS_CHOICES = [(s.value, s.label) for s in FlagStatus]
# The statuses a finding counts as waste in: an admin's acknowledgement says it was expected (a debugging session),
# and a resolved one is over; a disputed one still is waste until decided.
COUNTED_STATUSES = (FlagStatus.OPEN, FlagStatus.DISPUTED)
