"""A job's summary from its hour rows (pure): energy, split, coverage, occupancy, start and end."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class GpuTotals:
    """One job's rows on one GPU, summed over all ingested hours."""

    source: str
    sampled_s: float
    sm_s: float
    occupancy_s: float
    peak_memory_bytes: int
    job_start: datetime | None
    first_seen: datetime | None
    last_seen: datetime | None


@dataclass
class JobSummary:
    energy_j: float = 0.0
    attribution: str = ""
    attribution_j: dict[str, float] = field(default_factory=dict)
    sampled_s: float = 0.0
    expected_s: float = 0.0
    coverage: float = 0.0
    gpu_hours: float = 0.0
    sm_s: float = 0.0
    peak_memory_bytes: int = 0
    gpu_count: int = 0
    start: datetime | None = None
    last_seen: datetime | None = None
    end: datetime | None = None


def job_summarize(
    *,
    gpus: Iterable[GpuTotals],
    energy_by_method: dict[str, float],
    scrape_interval_s: float,
    ingested_through: datetime | None,
) -> JobSummary:
    """Coverage = sampled GPU-seconds / expected GPU-seconds, where expected runs on each GPU from the
    job's start (agent) or first sample (dcgm only) to its last sample there. Never above 1.

    `end` is the last sample once the ingest has gone a couple of scrapes past it without seeing the
    job again; before that the job may still be running and has no end.
    """
    gpus = list(gpus)
    s = JobSummary()
    s.attribution_j = {m: j for m, j in sorted(energy_by_method.items()) if j > 0}
    s.energy_j = sum(s.attribution_j.values())
    if s.attribution_j:
        s.attribution = max(s.attribution_j.items(), key=lambda kv: kv[1])[0]
    if not gpus:
        return s
    starts = [g.job_start for g in gpus if g.job_start] or [g.first_seen for g in gpus if g.first_seen]
    s.start = min(starts) if starts else None
    seen = [g.last_seen for g in gpus if g.last_seen]
    s.last_seen = max(seen) if seen else None
    for g in gpus:
        s.sampled_s += g.sampled_s
        s.sm_s += g.sm_s
        s.gpu_hours += g.occupancy_s / 3600.0
        s.peak_memory_bytes = max(s.peak_memory_bytes, g.peak_memory_bytes)
        if g.last_seen is None:
            continue
        if g.source == "agent" and s.start is not None:
            s.expected_s += max(0.0, (g.last_seen - s.start).total_seconds())
        elif g.first_seen is not None:
            s.expected_s += (g.last_seen - g.first_seen).total_seconds()
    s.gpu_count = len(gpus)
    if s.expected_s > 0:
        s.coverage = min(1.0, s.sampled_s / s.expected_s)
    elif s.sampled_s > 0:
        s.coverage = 1.0
    if s.last_seen is not None and ingested_through is not None:
        if s.last_seen < ingested_through - timedelta(seconds=2 * scrape_interval_s):
            s.end = s.last_seen
    return s
