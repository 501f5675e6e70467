"""The per-sample split of one GPU's energy among the jobs present on it (DESIGN.md section 2).

Pure functions over plain data, so they can be property-tested. Invariant, on every sample:
sum of the jobs' shares + idle == the sample's energy.

Two ways to split a shared sample where NVML gives per-process utilisation (`--split`):
- `sm_time`: by each job's SM time. It splits time, not power: a memory-bound kernel and a tensor-core
  kernel draw very different power over the same SM time.
- `sm_mem`: by a calibrated power model of the GPU model (power_model.py), P = p0 + a sm + b mem. The
  static part p0 x dt goes to the jobs present in equal parts (occupancy), the rest by each job's
  dynamic power: its own W per point of SM time x sm where it has been seen alone on the GPU long enough
  (power_model.JobSolo), else the model's max(a sm + b mem, 0). Until the model is calibrated, `sm_time`.

Whatever `--split` says, a shared sample where every job's processes report their exact GPU time (the
opt-in injection library, gputime.py) is split by it: `gpu_time` (gpu_time_fractions).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from fleetwatt_agent.model import Method, ProcessReading, Signal
from fleetwatt_agent.power_model import JobSolo, PowerFit

# How shared samples with NVML's per-process utilisation are split (--split). The default is set from the
# H200 measurements (docs/agent.md, "The split"): change this one line.
SplitChoice = Literal["sm_time", "sm_mem"]
SPLITS: tuple[SplitChoice, ...] = ("sm_time", "sm_mem")
DEFAULT_SPLIT: SplitChoice = "sm_time"


@dataclass(frozen=True)
class JobLoad:
    """One job's processes on one GPU in one sample, summed."""

    memory_bytes: int
    activity_pct: float  # summed over the job's processes; 0 where the driver had no sample for them
    pids: tuple[int, ...] = ()
    # Memory activity summed over the processes that have the signal; None where none of them has it
    # (a version-1 trace, the DRM backend, or no driver sample for any of the job's processes).
    mem_activity_pct: float | None = None
    # Exact GPU time in the sample, percent of its length, summed over the job's processes; None unless
    # every one of them reported it (ProcessReading.gpu_time_pct).
    gpu_time_pct: float | None = None
    # Of gpu_time_pct, the part counted from the library's windows rather than traced.
    gpu_time_estimated_pct: float | None = None


@dataclass(frozen=True)
class GpuTimePower:
    """What the `gpu_time` split knows of one GPU's power.

    p0_w: the GPU's power with nothing running (None: not known yet); own_w_per_pct: a job's energy
    above p0 per point of its GPU time, learned while it had the GPU to itself (power_model.JobSolo over
    its exact GPU time); typical_w_per_pct: the same over every job seen alone on a GPU of this model,
    for the jobs never seen alone (None: none seen yet)."""

    p0_w: float | None = None
    own_w_per_pct: Mapping[str, float] = field(default_factory=dict)
    typical_w_per_pct: float | None = None


@dataclass(frozen=True)
class SampleSplit:
    method: Method | None  # None: no job on the GPU, all idle
    shares_j: dict[str, float]
    idle_j: float


def job_loads(processes: Iterable[ProcessReading], job_of: Mapping[int, str]) -> dict[str, JobLoad]:
    """Group a GPU's processes by job. A PID with no job (unresolved) is not in `job_of`: never charged."""
    mem: dict[str, int] = {}
    act: dict[str, float] = {}
    mem_act: dict[str, float] = {}
    gpu_time: dict[str, float | None] = {}
    estimated: dict[str, float] = {}
    pids: dict[str, list[int]] = {}
    for proc in processes:
        key = job_of.get(proc.pid)
        if key is None:
            continue
        mem[key] = mem.get(key, 0) + max(proc.memory_bytes, 0)
        act[key] = act.get(key, 0.0) + max(proc.activity_pct or 0.0, 0.0)
        if proc.mem_activity_pct is not None:
            mem_act[key] = mem_act.get(key, 0.0) + max(proc.mem_activity_pct, 0.0)
        known = gpu_time.get(key, 0.0)
        gpu_time[key] = None if known is None or proc.gpu_time_pct is None else known + max(proc.gpu_time_pct, 0.0)
        estimated[key] = estimated.get(key, 0.0) + max(proc.gpu_time_estimated_pct or 0.0, 0.0)
        pids.setdefault(key, []).append(proc.pid)
    return {
        k: JobLoad(
            mem[k],
            act[k],
            tuple(pids[k]),
            mem_act.get(k),
            gpu_time[k],
            estimated[k] if gpu_time[k] is not None else None,
        )
        for k in mem
    }


def split_sample(
    energy_j: float,
    jobs: Mapping[str, JobLoad],
    signal: Signal | None,
    model: PowerFit | None = None,
    power_w: float | None = None,
    solo: Mapping[str, JobSolo] | None = None,
    gpu_power: GpuTimePower | None = None,
) -> SampleSplit:
    """Split one sample's energy.

    - no job: all idle;
    - one job: `whole_gpu`;
    - several, each with its exact GPU time in the sample: `gpu_time` (`gpu_time_fractions`);
    - several, with a calibrated power `model` of the GPU (given only under `--split sm_mem`), NVML's
      signal, memory activity from the driver, some job active (SM or memory) and the sample's mean
      board power `power_w` (energy / length) known: `sm_mem` (`sm_mem_fractions`);
    - several otherwise: `sm_time` / `busy_time` by compute activity where the backend has that signal
      and some job computed; otherwise `memory` by memory held (equal shares, still `memory`, in the rare
      case where the driver reports no per-process memory either: the agent never emits `equal`).
    """
    if not jobs:
        return SampleSplit(None, {}, energy_j)
    if len(jobs) == 1:
        (key,) = jobs
        return SampleSplit("whole_gpu", {key: energy_j}, 0.0)
    if all(load.gpu_time_pct is not None for load in jobs.values()):
        fractions = gpu_time_fractions(jobs, gpu_power or GpuTimePower(), power_w)
        return SampleSplit("gpu_time", proportional(energy_j, fractions), 0.0)
    if (
        model is not None
        and model.calibrated
        and signal == "sm"
        and power_w is not None
        and power_w > 0.0
        and any(load.mem_activity_pct is not None for load in jobs.values())
        and any(load.activity_pct > 0.0 or (load.mem_activity_pct or 0.0) > 0.0 for load in jobs.values())
    ):
        return SampleSplit("sm_mem", proportional(energy_j, sm_mem_fractions(jobs, model, power_w, solo)), 0.0)
    method: Method
    weights: dict[str, float]
    if signal is not None and any(load.activity_pct > 0.0 for load in jobs.values()):
        method = "sm_time" if signal == "sm" else "busy_time"
        weights = {k: load.activity_pct for k, load in jobs.items()}
    else:
        method = "memory"
        weights = _memory_weights(jobs)
    return SampleSplit(method, proportional(energy_j, weights), 0.0)


def gpu_time_fractions(jobs: Mapping[str, JobLoad], power: GpuTimePower, power_w: float | None) -> dict[str, float]:
    """Each job's fraction of a shared sample by its exact GPU time (they add up to 1).

    As the truth of docs/accuracy.md: the static part p0 x dt (a fraction p0 / power_w, clamped to
    [0, 1]; 0 while p0 or the sample's power is unknown) goes to the jobs present in equal parts, the rest
    in proportion to each job's GPU time x its energy above p0 per point of GPU time. A job's own figure
    comes from its samples alone (the energy it made the GPU draw per second of its kernels, pauses that
    keep the clocks up included), else the GPU model's typical one, else the mean of the others' (or plain
    GPU time when no job has a figure). Nobody ran anything: equal parts. Scaling to the sample's
    measured energy charges power drawn together beyond the parts alone in proportion to those parts."""
    n = len(jobs)
    static = 0.0
    if power.p0_w is not None and power_w is not None and power_w > 0.0:
        static = min(max(power.p0_w / power_w, 0.0), 1.0)
    known = [w for k, w in power.own_w_per_pct.items() if k in jobs]
    fallback = power.typical_w_per_pct
    if fallback is None:
        fallback = math.fsum(known) / len(known) if known else 1.0
    dynamic = {k: max(load.gpu_time_pct or 0.0, 0.0) * power.own_w_per_pct.get(k, fallback) for k, load in jobs.items()}
    total = math.fsum(dynamic.values())
    if total <= 0.0:
        return dict.fromkeys(jobs, 1.0 / n)
    return {k: static / n + (1.0 - static) * (w / total) for k, w in dynamic.items()}


def sm_mem_fractions(
    jobs: Mapping[str, JobLoad], model: PowerFit, power_w: float, solo: Mapping[str, JobSolo] | None = None
) -> dict[str, float]:
    """Each job's fraction of a shared sample under the power model (they add up to 1).

    The static part p0 x dt of the sample's energy E = power_w x dt, clamped to [0, E] (a fraction
    p0 / power_w in [0, 1]), is the GPU's power with a job's context resident and nothing running: every
    job present holds it up, so they share it equally (occupancy). The rest goes by each job's dynamic
    power: its own power per point of SM time (`solo`, from its samples alone on this GPU) x sm where it
    has enough of them, else the model's max(a sm + b mem, 0); if that is 0 for every job, by SM time; if
    that is 0 too, by memory held (equal where nobody holds any).
    """
    static = min(max(model.p0_w / power_w, 0.0), 1.0)
    n = len(jobs)
    dynamic = _dynamic_weights(jobs, model, power_w, solo or {})
    if not any(w > 0.0 for w in dynamic.values()):
        dynamic = {k: load.activity_pct for k, load in jobs.items()}
        if not any(w > 0.0 for w in dynamic.values()):
            dynamic = _memory_weights(jobs)
    total = math.fsum(dynamic.values())
    return {k: static / n + (1.0 - static) * (w / total) for k, w in dynamic.items()}


def _dynamic_weights(
    jobs: Mapping[str, JobLoad], model: PowerFit, power_w: float, solo: Mapping[str, JobSolo]
) -> dict[str, float]:
    """Each job's dynamic power in the sample, W. A job with its own power (JobSolo) draws that x its SM
    time. If every job has its own, that is all; otherwise the jobs without one share what the board drew
    above p0 beyond the others' (by the model's a sm + b mem), and the jobs with one are scaled down if
    they alone would exceed it: the measured power, not the model, says how much the newcomers draw."""
    own: dict[str, float] = {}
    for key, load in jobs.items():
        per_pct = solo[key].dynamic_w_per_sm_pct(model.p0_w) if key in solo else None
        if per_pct is not None:
            own[key] = per_pct * load.activity_pct
    modelled = {
        k: model.dynamic_w(load.activity_pct, load.mem_activity_pct or 0.0) for k, load in jobs.items() if k not in own
    }
    if not own or not modelled:
        return own or modelled
    available = max(power_w - model.p0_w, 0.0)
    own_w = math.fsum(own.values())
    scale = min(1.0, available / own_w) if own_w > 0.0 else 1.0
    rest = available - own_w * scale
    modelled_w = math.fsum(modelled.values())
    if modelled_w <= 0.0:
        modelled = {k: jobs[k].activity_pct for k in modelled}
        modelled_w = math.fsum(modelled.values())
    shares = {k: rest * (w / modelled_w) if modelled_w > 0.0 else 0.0 for k, w in modelled.items()}
    return {**{k: w * scale for k, w in own.items()}, **shares}


def _memory_weights(jobs: Mapping[str, JobLoad]) -> dict[str, float]:
    weights = {k: float(load.memory_bytes) for k, load in jobs.items()}
    if not any(w > 0.0 for w in weights.values()):
        weights = {k: 1.0 for k in jobs}
    return weights


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
