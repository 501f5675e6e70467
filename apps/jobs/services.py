"""Writes to jobs: their summaries, recomputed from their hour rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from apps.core.db.bulk import rows_update
from apps.core.kept import data_changed

from .models import Job
from .summary import JobGpuTotals, SchedulerSpan, job_summarize
from .uncertainty import BandRow, job_energy_band

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
    "first_day",
    "last_day",
]
# The interval of a job's energy, refreshed with its summary (apps.jobs.uncertainty).
BAND_FIELDS = ["energy_low_j", "energy_high_j"]


def scheduler_span(job: Job) -> SchedulerSpan | None:
    """The span the job's scheduler recorded, where it recorded one."""
    if job.scheduler_start is None:
        return None
    return SchedulerSpan(
        start=job.scheduler_start,
        end=job.scheduler_end,
        seen_at=job.scheduler_seen_at,
        gpus=job.gpus_allocated or 0,
    )


def jobs_summary_refresh(
    *,
    jobs: Sequence[Job],
    totals: Mapping[int, Sequence[JobGpuTotals]],
    energy_by_method: Mapping[int, Mapping[str, float]],
    gpu_sampled: Mapping[tuple[int, datetime], float],
    ingested_through: datetime | None,
    cluster_ingested_through: Mapping[int, datetime] | None = None,
    band_rows: Mapping[int, Sequence[BandRow]] | None = None,
) -> None:
    """Recompute the summary of each job from the sums of all its hour rows (so the order of ingest never
    matters): energy and split, coverage, GPU-hours, span; in place on `jobs` (their cluster loaded), stored
    by `jobs_fields_write` with the run's other figures (SUMMARY_FIELDS). `gpu_sampled`: the agent's sampled seconds per
    (GPU, hour) over the jobs' spans (apps.telemetry.selectors.gpu_sampled_seconds). `ingested_through`: how
    far the ingest of the jobs' cluster has gone (an ingest knows it), else `cluster_ingested_through`.
    `band_rows`: each job's rows on shared GPUs (apps.telemetry.selectors.job_band_rows), for the interval of its
    energy (BAND_FIELDS); without them a job has none."""
    if not jobs:
        return
    for job in jobs:
        s = job_summarize(
            gpus=totals.get(job.pk, []),
            energy_by_method=dict(energy_by_method.get(job.pk, {})),
            scrape_interval_s=job.cluster.scrape_interval_s,
            ingested_through=ingested_through or (cluster_ingested_through or {}).get(job.cluster_id),
            gpu_sampled=gpu_sampled,
            scheduler=scheduler_span(job),
        )
        for name in SUMMARY_FIELDS:
            setattr(job, name, getattr(s, name))
        band = job_energy_band(job.energy_j, (band_rows or {}).get(job.pk, ()))
        job.energy_low_j, job.energy_high_j = band if band is not None else (None, None)


def job_work_record(*, job: Job, work_units: float, work_unit: str) -> None:
    """The work a job reports (SCI is per unit of it)."""
    job.work_units, job.work_unit = work_units, work_unit
    job.save(update_fields=["work_units", "work_unit"])
    data_changed()  # its SCI and functional unit, on the jobs list


def jobs_fields_write(*, jobs: Sequence[Job], fields: Iterable[str]) -> None:
    """Store the given fields of the jobs, computed in place by the steps before: one UPDATE for all of them
    (each UPDATE writes a new version of every row, with an entry in each of the table's indexes)."""
    rows_update(jobs, sorted(set(fields)))
