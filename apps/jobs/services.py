"""Writes to jobs: their summaries, recomputed from their hour rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from apps.core.bulk import rows_update

from .models import Job
from .summary import JobGpuTotals, job_summarize

SUMMARY_FIELDS = [
    "energy_j",
    "attribution",
    "attribution_j",
    "sampled_s",
    "expected_s",
    "coverage",
    "gpu_hours",
    "sm_s",
    "peak_memory_bytes",
    "gpu_count",
    "start",
    "last_seen",
    "end",
]


def jobs_summary_refresh(
    *,
    jobs: Sequence[Job],
    totals: Mapping[int, Sequence[JobGpuTotals]],
    energy_by_method: Mapping[int, Mapping[str, float]],
    gpu_sampled: Mapping[tuple[int, datetime], float],
    ingested_through: datetime | None,
) -> None:
    """Recompute the summary of each job from the sums of all its hour rows (so the order of ingest never
    matters): energy and split, coverage, GPU-hours, span; in place on `jobs` (their cluster loaded), then
    stored. `gpu_sampled`: the agent's sampled seconds per
    (GPU, hour) over the jobs' spans (apps.telemetry.selectors.gpu_sampled_seconds)."""
    if not jobs:
        return
    for job in jobs:
        s = job_summarize(
            gpus=totals.get(job.pk, []),
            energy_by_method=dict(energy_by_method.get(job.pk, {})),
            scrape_interval_s=job.cluster.scrape_interval_s,
            ingested_through=ingested_through,
            gpu_sampled=gpu_sampled,
        )
        for name in SUMMARY_FIELDS:
            setattr(job, name, getattr(s, name))
    rows_update(jobs, SUMMARY_FIELDS)
