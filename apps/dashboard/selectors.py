"""Reads of the admins' status page: how far each cluster's energy ingest and scheduler sync have got."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q

from apps.fleet.models import Cluster
from apps.jobs.models import Job
from apps.jobs.states import JobState
from apps.telemetry.models import IngestWatermark

RECENT = timedelta(days=1)  # "jobs of the last day": seen since then
RECENT_MISSING_LISTED = 10  # the missing jobs named on the page, per cluster


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

    @property
    def has_scheduler(self) -> bool:
        return bool(self.cluster.scheduler)


def scheduler_sync_status(*, now: datetime) -> list[ClusterSyncStatus]:
    """Every cluster, by name: three queries whatever their number (clusters, watermarks, one aggregate of
    the last day's jobs) and one per cluster that has missing jobs, for their names."""
    since = now - RECENT
    clusters = list(Cluster.objects.order_by("name"))
    marks = dict(IngestWatermark.objects.values_list("cluster_id", "ingested_through"))
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
            )
        )
    return out
