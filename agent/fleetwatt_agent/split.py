"""The per-sample split of one GPU's energy among the jobs present on it (DESIGN.md section 2).

Pure functions over plain data, so they can be property-tested. Invariant, on every sample:
sum of the jobs' shares + idle == the sample's energy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from fleetwatt_agent.model import Method, ProcessReading, Signal


@dataclass(frozen=True)
class JobLoad:
    """One job's processes on one GPU in one sample, summed."""

    memory_bytes: int
    activity_pct: float  # summed over the job's processes; 0 where the driver had no sample for them
    pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class SampleSplit:
    method: Method | None  # None: no job on the GPU, all idle
    shares_j: dict[str, float]
    idle_j: float


def job_loads(processes: Iterable[ProcessReading], job_of: Mapping[int, str]) -> dict[str, JobLoad]:
    """Group a GPU's processes by job. A PID with no job (unresolved) is not in `job_of`: never charged."""
    mem: dict[str, int] = {}
    act: dict[str, float] = {}
    pids: dict[str, list[int]] = {}
    for proc in processes:
        key = job_of.get(proc.pid)
        if key is None:
            continue
        mem[key] = mem.get(key, 0) + max(proc.memory_bytes, 0)
        act[key] = act.get(key, 0.0) + max(proc.activity_pct or 0.0, 0.0)
        pids.setdefault(key, []).append(proc.pid)
    return {k: JobLoad(mem[k], act[k], tuple(pids[k])) for k in mem}


def split_sample(energy_j: float, jobs: Mapping[str, JobLoad], signal: Signal | None) -> SampleSplit:
    """Split one sample's energy.

    - no job: all idle;
    - one job: `whole_gpu`;
    - several: `sm_time` / `busy_time` by compute activity where the backend has that signal and some
      job computed; otherwise `memory` by memory held (equal shares, still `memory`, in the rare case
      where the driver reports no per-process memory either: the agent never emits `equal`).
    """
    if not jobs:
        return SampleSplit(None, {}, energy_j)
    if len(jobs) == 1:
        (key,) = jobs
        return SampleSplit("whole_gpu", {key: energy_j}, 0.0)
    method: Method
    weights: dict[str, float]
    if signal is not None and any(load.activity_pct > 0.0 for load in jobs.values()):
        method = "sm_time" if signal == "sm" else "busy_time"
        weights = {k: load.activity_pct for k, load in jobs.items()}
    else:
        method = "memory"
        weights = {k: float(load.memory_bytes) for k, load in jobs.items()}
        if not any(w > 0.0 for w in weights.values()):
            weights = {k: 1.0 for k in jobs}
    return SampleSplit(method, proportional(energy_j, weights), 0.0)


K = TypeVar("K")


def proportional(total: float, weights: Mapping[K, float]) -> dict[K, float]:
    """`total` in proportion to non-negative `weights` (at least one positive); parts sum to total.

    The largest part takes the float rounding remainder so that the parts add back up exactly where the
    arithmetic allows it, and it is the part least affected by the adjustment.
    """
    wsum = math.fsum(weights.values())
    parts = {k: total * (w / wsum) for k, w in weights.items()}
    if parts:
        largest = max(parts, key=lambda k: parts[k])
        rest = math.fsum(v for k, v in parts.items() if k != largest)
        parts[largest] = total - rest
    return parts
