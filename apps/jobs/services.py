"""Writes to jobs: their summaries, recomputed from their hour rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Max, Min, Sum

from apps.core.bulk import rows_update

from .models import Job, JobGpuHour, JobGpuHourEnergy
from .summary import GpuTotals, job_summarize

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


def jobs_summary_refresh(*, job_ids: Iterable[int], ingested_through: datetime) -> None:
    """Recompute the summary of each job from all its hour rows (so the order of ingest never matters),
    then its flags."""
    from apps.waste.services import job_flags_sync

    ids = sorted(set(job_ids))
    if not ids:
        return
    per_gpu = (
        JobGpuHour.objects.filter(job_id__in=ids)
        .values("job_id", "gpu_id", "source")
        .annotate(
            sampled_s=Sum("sampled_s"),
            sm_s=Sum("sm_s"),
            occupancy_s=Sum("occupancy_s"),
            peak_memory_bytes=Max("peak_memory_bytes"),
            job_start=Min("job_start"),
            first_seen=Min("first_seen"),
            last_seen=Max("last_seen"),
        )
        .order_by()
    )
    gpus: dict[int, list[GpuTotals]] = defaultdict(list)
    for row in per_gpu:
        gpus[row["job_id"]].append(
            GpuTotals(
                source=row["source"],
                sampled_s=row["sampled_s"] or 0.0,
                sm_s=row["sm_s"] or 0.0,
                occupancy_s=row["occupancy_s"] or 0.0,
                peak_memory_bytes=row["peak_memory_bytes"] or 0,
                job_start=row["job_start"],
                first_seen=row["first_seen"],
                last_seen=row["last_seen"],
            )
        )
    energy: dict[int, dict[str, float]] = defaultdict(dict)
    for row in (
        JobGpuHourEnergy.objects.filter(job_id__in=ids)
        .values("job_id", "method")
        .annotate(j=Sum("energy_j"))
        .order_by()
    ):
        energy[row["job_id"]][row["method"]] = row["j"]
    jobs = list(Job.objects.filter(pk__in=ids).select_related("cluster"))
    for job in jobs:
        s = job_summarize(
            gpus=gpus.get(job.pk, []),
            energy_by_method=energy.get(job.pk, {}),
            scrape_interval_s=job.cluster.scrape_interval_s,
            ingested_through=ingested_through,
        )
        for name in SUMMARY_FIELDS:
            setattr(job, name, getattr(s, name))
    rows_update(jobs, SUMMARY_FIELDS)
    job_flags_sync(jobs=jobs)
