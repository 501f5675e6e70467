"""How a job used its GPUs, from its GPU-hour rows (pure): the summary its page opens with.

Every figure is over the time the job was seen (rows with sampled seconds; an estimate of time nobody saw
has no SM, memory or power to show):
- SM busy: SM-busy seconds / sampled seconds, the agent's (or DCGM's) per-process signal;
- GPU memory held: the highest of the hours' peaks (the product does not record a GPU's memory size);
- mean power: the job's GPU energy / its sampled seconds, per GPU: its share of the GPU where it shared one;
- peak power is not recorded (the ingest keeps energy per hour, not power samples): the highest hourly mean
  stands in for it, from hours seen for at least PEAK_HOUR_MIN_S;
- time on a shared GPU: each GPU-hour's occupancy (a sample's length divided by the jobs present) is short of
  its sampled seconds by the shared time x (1 - 1/k) with k jobs present, so the shared time is that shortfall
  x k / (k - 1). Exact where two jobs shared the GPU-hour; with k the number of jobs on it in the hour (not all
  of them present at once, maybe) it is the least the shared time can be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

PEAK_HOUR_MIN_S = 300.0  # a few minutes of an hour give a mean that says more of the counters' steps than of power
ALONE_RATIO = 0.99  # occupancy within 1 % of sampled: alone (as JobGpuTotals.alone)


@dataclass(frozen=True)
class UtilisationRow:
    """One job-GPU-hour row, the columns the summary reads."""

    gpu_id: int
    gpu: str  # its name on the pages: host/index
    hour: datetime
    estimated: bool  # charged for time nobody saw: no measurement in it
    energy_j: float
    sampled_s: float
    sm_s: float
    occupancy_s: float
    peak_memory_bytes: int


@dataclass(frozen=True)
class JobUtilisation:
    seen_s: float  # GPU-seconds sampled (over all its GPUs), each hour's at most the hour
    sm_busy: float | None  # 0..1; None: never seen
    peak_memory_bytes: int
    mean_power_w: float | None  # per GPU while seen
    peak_hour_power_w: float | None  # the highest hourly mean, per GPU
    peak_hour: datetime | None
    peak_gpu: str  # the GPU of that hour ("" without one)
    shared_s: float  # GPU-seconds it shared a GPU with other jobs
    shared_exact: bool  # every shared GPU-hour had two jobs: shared_s is exact, else the least it can be

    @property
    def shared_share(self) -> float | None:
        return min(1.0, self.shared_s / self.seen_s) if self.seen_s else None


def shared_seconds(*, sampled_s: float, occupancy_s: float, jobs_on_gpu_hour: int) -> float:
    """Seconds of one GPU-hour the job shared its GPU: its occupancy's shortfall x k / (k - 1) (module docstring),
    0 when it was alone (within ALONE_RATIO) or alone on the GPU-hour, never more than it was seen."""
    if sampled_s <= 0 or occupancy_s >= ALONE_RATIO * sampled_s or jobs_on_gpu_hour < 2:
        return 0.0
    k = jobs_on_gpu_hour
    return min(sampled_s, (sampled_s - occupancy_s) * k / (k - 1))


def job_utilisation(
    rows: Iterable[UtilisationRow], *, jobs_on_gpu_hour: Mapping[tuple[int, datetime], int], hour_s: float = 3600.0
) -> JobUtilisation:
    """The summary of a job's rows; `jobs_on_gpu_hour`: how many jobs had a measured row on each (GPU, hour)."""
    measured = [r for r in rows if not r.estimated]
    seen = [r for r in measured if r.sampled_s > 0]
    # An hour's sampled seconds can pass the hour by a scrape's length (glossary.SAMPLED_CAP_NOTE): capped here.
    seen_s = sum(min(r.sampled_s, hour_s) for r in seen)
    sm_s = sum(r.sm_s for r in seen)
    energy_j = sum(r.energy_j for r in seen)
    peak = max(
        (r for r in seen if r.sampled_s >= PEAK_HOUR_MIN_S),
        key=lambda r: (r.energy_j / min(r.sampled_s, hour_s), r.hour, r.gpu_id),
        default=None,
    )
    shared = [
        (r, shared_seconds(sampled_s=min(r.sampled_s, hour_s), occupancy_s=r.occupancy_s,
                           jobs_on_gpu_hour=jobs_on_gpu_hour.get((r.gpu_id, r.hour), 1)))
        for r in seen
    ]  # fmt: skip
    return JobUtilisation(
        seen_s=seen_s,
        sm_busy=min(1.0, sm_s / seen_s) if seen_s else None,
        peak_memory_bytes=max((r.peak_memory_bytes for r in measured), default=0),
        mean_power_w=energy_j / seen_s if seen_s else None,
        peak_hour_power_w=peak.energy_j / min(peak.sampled_s, hour_s) if peak else None,
        peak_hour=peak.hour if peak else None,
        peak_gpu=peak.gpu if peak else "",
        shared_s=sum(s for _, s in shared),
        shared_exact=all(jobs_on_gpu_hour.get((r.gpu_id, r.hour), 1) <= 2 for r, s in shared if s > 0),
    )
