"""Reads of the pages that no other app's selectors make: the admins' status page (how far each cluster's
energy ingest and scheduler sync have got), the jobs of a GPU-hour finding, and the hours a job was not seen."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q

from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.jobs.states import JobState
from apps.telemetry.models import GpuHour, IngestBatch, IngestWatermark
from apps.telemetry.selectors import clusters_meterless_gpus
from apps.waste.models import Flag

RECENT = timedelta(days=1)  # "jobs of the last day": seen since then
RECENT_MISSING_LISTED = 10  # the missing jobs named on the page, per cluster
UNSEEN_MIN_S = 18.0  # 0.5 % of an hour: less is the meters' disagreement, not time missed (docs/arithmetic.md)


@dataclass(frozen=True)
class ClusterSyncStatus:
    """One cluster's line: the energy ingest's and the scheduler sync's watermarks, the sync's last error,
    and the jobs of the last day that no scheduler record describes."""

    cluster: Cluster
    ingested_through: datetime | None
    ingest_lag_h: int | None  # whole hours between the watermark and `now`'s hour
    scheduler_lag_h: float | None
    recent_jobs: int  # jobs seen in the last day
    unknown: int  # of them, with no scheduler record (state unknown)
    missing: int  # of them, absent from a whole window of the scheduler's accounting
    missing_jobs: list[Job]
    open_batch: IngestBatch | None = None  # the fanned-out ingest's batch in progress, and its last error
    no_energy_meter: list[dict[str, Any]] = field(default_factory=list)  # GPUs of its last hour with no meter

    @property
    def has_scheduler(self) -> bool:
        return bool(self.cluster.scheduler)


def scheduler_sync_status(*, now: datetime) -> list[ClusterSyncStatus]:
    """Every cluster, by name: four queries whatever their number (clusters, watermarks, open ingest batches,
    one aggregate of the last day's jobs) and one per cluster that has missing jobs, for their names."""
    since = now - RECENT
    clusters = list(Cluster.objects.order_by("name"))
    marks = dict(IngestWatermark.objects.values_list("cluster_id", "ingested_through"))
    batches = {b.cluster_id: b for b in IngestBatch.objects.filter(done_at__isnull=True)}
    recent = Job.objects.filter(start__lt=now).seen_since(since)
    counts = {
        r["cluster_id"]: r
        for r in recent.values("cluster_id")
        .annotate(
            seen=Count("id"),
            unknown=Count("id", filter=Q(state=JobState.UNKNOWN)),
            missing=Count("id", filter=Q(scheduler_missing=True)),
        )
        .order_by()
    }
    hour = now.replace(minute=0, second=0, microsecond=0)
    meterless = clusters_meterless_gpus()
    out = []
    for cluster in clusters:
        mark = marks.get(cluster.pk)
        c = counts.get(cluster.pk, {"seen": 0, "unknown": 0, "missing": 0})
        synced = cluster.scheduler_synced_through
        out.append(
            ClusterSyncStatus(
                cluster=cluster,
                ingested_through=mark,
                ingest_lag_h=max(0, int((hour - mark).total_seconds() // 3600)) if mark else None,
                scheduler_lag_h=max(0.0, (now - synced).total_seconds() / 3600) if synced else None,
                recent_jobs=c["seen"],
                unknown=c["unknown"],
                missing=c["missing"],
                missing_jobs=list(
                    recent.filter(cluster=cluster, scheduler_missing=True).order_by("-start", "id")[
                        :RECENT_MISSING_LISTED
                    ]
                )
                if c["missing"]
                else [],
                open_batch=batches.get(cluster.pk),
                no_energy_meter=meterless.get(cluster.pk, []),
            )
        )
    return out


def gpu_hour_flag_jobs(flags: list[Flag]) -> dict[int, list[Job]]:
    """{flag id: the jobs that ran on its GPU in its hour} for the GPU-hour findings among `flags` (the
    audit queue's: a decision is taken on one of those jobs). One query, whatever their number."""
    subjects = {(f.gpu_id, f.hour): f.pk for f in flags if f.job_id is None and f.gpu_id and f.hour}
    if not subjects:
        return {}
    match = Q()
    for gpu_id, hour in subjects:
        match |= Q(gpu_id=gpu_id, hour=hour)
    out: dict[int, list[Job]] = {pk: [] for pk in subjects.values()}
    seen: set[tuple[int, int]] = set()  # (flag, job): a job once per finding, without scanning its list
    rows = JobGpuHour.objects.filter(match).select_related("job").order_by("job__job_key", "id")
    for row in rows:
        flag_id = subjects[(row.gpu_id, row.hour)]
        if (flag_id, row.job_id) not in seen:
            seen.add((flag_id, row.job_id))
            out[flag_id].append(row.job)
    return out


@dataclass(frozen=True)
class HourGap:
    """What nobody saw of a job's GPU in one hour: the GPU-hour's unseen seconds and energy (all its jobs')."""

    unobserved_s: float
    unobserved_j: float
    estimated_s: float


def job_hour_gaps(*, job: Job) -> dict[tuple[int, datetime], HourGap]:
    """{(GPU id, hour): its gap} for the GPU-hours the job ran in where the agent missed part of the hour
    (unseen seconds), for the job's page: hours the agent missed appear as such."""
    hours = GpuHour.objects.filter(
        gpu_id__in=job.gpu_hours_rows.values("gpu_id"),
        hour__in=job.gpu_hours_rows.values("hour"),
    ).filter(Q(unobserved_s__gte=UNSEEN_MIN_S) | Q(estimated_s__gt=0))
    return {
        (h.gpu_id, h.hour): HourGap(unobserved_s=h.unobserved_s, unobserved_j=h.unobserved_j, estimated_s=h.estimated_s)
        for h in hours.only("gpu_id", "hour", "unobserved_s", "unobserved_j", "estimated_s")
    }
