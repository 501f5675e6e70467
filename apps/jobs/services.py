"""Writes to jobs: their summaries, recomputed from their hour rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Max, Min, Sum

from apps.core.bulk import rows_update
from apps.telemetry.models import GpuHour

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
                gpu_id=row["gpu_id"],
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
    gpu_sampled = _gpu_sampled_over_spans(gpus)
    jobs = list(Job.objects.filter(pk__in=ids).select_related("cluster"))
    for job in jobs:
        s = job_summarize(
            gpus=gpus.get(job.pk, []),
            energy_by_method=energy.get(job.pk, {}),
            scrape_interval_s=job.cluster.scrape_interval_s,
            ingested_through=ingested_through,
            gpu_sampled=gpu_sampled,
        )
        for name in SUMMARY_FIELDS:
            setattr(job, name, getattr(s, name))
    rows_update(jobs, SUMMARY_FIELDS)
    job_flags_sync(jobs=jobs)


def _gpu_sampled_over_spans(gpus: dict[int, list[GpuTotals]]) -> dict[tuple[int, datetime], float]:
    """The agent's sampled seconds of every GPU-hour the jobs' spans touch (for their coverage)."""
    spans: dict[int, tuple[datetime, datetime]] = {}
    for totals in gpus.values():
        starts = [g.job_start for g in totals if g.job_start]
        for g in totals:
            if g.source != "agent" or not starts or g.last_seen is None:
                continue
            a, b = spans.get(g.gpu_id, (min(starts), g.last_seen))
            spans[g.gpu_id] = (min(a, min(starts)), max(b, g.last_seen))
    if not spans:
        return {}
    lo = min(a for a, _ in spans.values()).replace(minute=0, second=0, microsecond=0)
    hi = max(b for _, b in spans.values())
    rows = GpuHour.objects.filter(gpu_id__in=list(spans), hour__gte=lo, hour__lte=hi).values_list(
        "gpu_id", "hour", "sampled_s"
    )
    return {(gpu_id, hour): sampled for gpu_id, hour, sampled in rows}
