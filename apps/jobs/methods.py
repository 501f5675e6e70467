"""The split methods: how a job's share of a GPU's energy was found (pure; DESIGN section 2).

Defined once here: the models' choices, the API's help, the CSV's per-method columns and the pages'
legend colours all come from this list, from exact to rough.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class MethodInfo:
    label: str
    exactness: str  # exact, close, rough, estimate
    meaning: str
    colour: str  # the pages' chart colour


class Method(StrEnum):
    WHOLE_GPU = "whole_gpu"
    GPU_TIME = "gpu_time"
    SM_TIME = "sm_time"
    SM_MEM = "sm_mem"
    BUSY_TIME = "busy_time"
    MEMORY = "memory"
    EQUAL = "equal"
    ESTIMATED = "estimated"

    @property
    def info(self) -> MethodInfo:
        return METHOD_INFO[self]

    @property
    def label(self) -> str:
        return self.info.label


METHOD_INFO: dict[Method, MethodInfo] = {
    Method.WHOLE_GPU: MethodInfo(
        "Whole GPU (exact)", "exact", "One job on the GPU: all the sample's energy is the job's.", "#1b6ca8"
    ),
    Method.GPU_TIME: MethodInfo(
        "Exact GPU time (close)",
        "close",
        "Several jobs, each reporting its own GPU time (the opt-in CUPTI library on the node): the GPU's static "
        "power shared by presence, the rest by each job's GPU time times the energy per GPU second it drew "
        "alone; the time is exact, the power learned.",
        "#17806d",
    ),
    Method.SM_TIME: MethodInfo(
        "SM time (close)", "close", "Several jobs: split by each process's SM time (NVML).", "#3fa34d"
    ),
    Method.SM_MEM: MethodInfo(
        "SM + memory power model (close)",
        "close",
        "Several jobs: the GPU's static power shared equally, the rest by each job's modelled power from its SM "
        "and memory activity (NVML), with a power model the agent calibrated on this GPU model.",
        "#2a9d8f",
    ),
    Method.BUSY_TIME: MethodInfo(
        "Engine busy time (close)", "close", "Several jobs: split by engine busy time (DRM fdinfo).", "#8bc34a"
    ),
    Method.MEMORY: MethodInfo(
        "Memory held (rough)", "rough", "Several jobs, no compute signal: split by GPU memory held.", "#f0a202"
    ),
    Method.EQUAL: MethodInfo(
        "Equal shares (rough)", "rough", "Several jobs, no per-job signal: equal shares.", "#d1495b"
    ),
    Method.ESTIMATED: MethodInfo(
        "Estimated (not measured)",
        "estimate",
        "Time the agent did not see while the scheduler says the job held the GPU: DCGM's meter for that time, "
        "split like the job's seen part.",
        "#8d8d8d",
    ),
}

METHOD_CHOICES = [(m.value, m.label) for m in Method]
METHODS = tuple(m.value for m in Method)


def method_legend() -> list[dict[str, str]]:
    """What the pages need to draw and explain each method (handed over with `json_script`)."""
    return [
        {"method": m.value, "label": m.label, "exactness": m.info.exactness, "meaning": m.info.meaning,
         "colour": m.info.colour}
        for m in Method
    ]  # fmt: skip
