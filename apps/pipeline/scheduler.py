"""The scheduler sync, end to end: read a cluster's accounting for a window (apps.schedulers.sources) and,
in one transaction, store each job's record (apps.schedulers.services) and move the cluster's watermark.
Beat's catch-up and `manage.py sync_scheduler` run it. An unreadable scheduler is recorded on the cluster
(`scheduler_status`) and writes nothing; the energy ingest does not depend on it.

The records' jobs are then derived (apps.pipeline.derive, `Fact.SCHEDULER`): the hours they held are charged
the time nobody saw (estimated occupancy and energy), their summaries take the scheduler's span, and a run
whose scheduler says it failed gets a `failed_run` finding with what it cost."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.task_retries import DATABASE_UNAVAILABLE
from apps.fleet import services as fleet
from apps.fleet.models import Cluster
from apps.fleet.selectors import TeamResolver
from apps.jobs.models import Job
from apps.schedulers import services as schedulers
from apps.schedulers.services import SyncReport
from apps.schedulers.sources import SchedulerUnavailable, one_line, scheduler_records_read
from apps.telemetry import services as telemetry

from .derive import Fact, Scope, derive

log = logging.getLogger(__name__)

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
FIRST_SYNC = timedelta(hours=24)  # how far back a cluster's first sync reads


class SchedulerSyncError(Exception):
    """Bad input to the sync (window, cluster); nothing was read or written."""


def scheduler_clusters_select(name: str | None) -> list[Cluster]:
    """The named cluster (which must have a scheduler), or every cluster that has one."""
    if name is None:
        with_records = ~Q(scheduler=Cluster.Scheduler.NONE) | Q(kube_pods=True)
        return list(Cluster.objects.filter(with_records).order_by("name"))
    try:
        cluster = Cluster.objects.get(name=name)
    except Cluster.DoesNotExist:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
        raise SchedulerSyncError(f"Unknown cluster {name!r} (known: {known}).") from None
    if not cluster.scheduler_sources():
        raise SchedulerSyncError(
            f"Cluster {name!r} has no scheduler configured (set its scheduler to slurm_sacct, slurm_rest or "
            "kube_state_metrics, or kube_pods for Kubernetes beside Slurm)."
        )
    return [cluster]


def scheduler_sync(*, cluster: Cluster, start: datetime, end: datetime, now: datetime | None = None) -> SyncReport:
    """Read the cluster's accounting for [start, end) and store it, in one transaction with the watermark
    (moved to `end`, or to the time of the read where `end` is later) and a cleared `scheduler_status`. Running it again
    writes the same.

    On SchedulerUnavailable: the error is recorded in `scheduler_status` and logged on one line, nothing is
    written, the watermark stays; the error propagates to the caller."""
    if start.tzinfo is None or end.tzinfo is None:
        raise SchedulerSyncError("A sync window needs times with a zone.")
    if start >= end:
        raise SchedulerSyncError(f"The window's start {start.isoformat()} must be before its end {end.isoformat()}.")
    now = now or timezone.now()  # before the read: the watermark never passes what it can have seen
    try:
        records = scheduler_records_read(cluster=cluster, start=start, end=end, now=now)
    except SchedulerUnavailable as exc:
        schedulers.scheduler_status_record(cluster=cluster, status=str(exc))
        log.warning("scheduler sync: %s; nothing written, synced through %s", exc, cluster.scheduler_synced_through)
        raise
    with transaction.atomic():
        schedulers.cluster_sync_lock(cluster=cluster)
        telemetry.cluster_write_lock(cluster=cluster)  # before any write: an ingest of the cluster waits
        teams = TeamResolver(cluster=cluster, unassigned=fleet.unassigned_team_ensure())
        report = schedulers.scheduler_records_write(
            cluster=cluster,
            records=records,
            window_complete=True,
            teams=teams,
            start=start,
            end=end,
            seen_at=now,
        )
        # What follows from the jobs' spans and states: estimates, summaries, footprints, findings; for a record
        # read again unchanged, nothing; for a job still running, the hours since its record was last read.
        if report.changed_job_ids:
            derive(Scope.jobs(report.changed_job_ids), changed={Fact.SCHEDULER})
        if report.running_job_ids:
            derive(_running_scope(cluster, report, now), changed={Fact.SCHEDULER})
        schedulers.scheduler_watermark_advance(cluster=cluster, through=min(end, now))
        schedulers.scheduler_status_record(cluster=cluster, status="")
    log.info(
        "scheduler sync: cluster %s [%s, %s): %d records, %d jobs created, %d updated, %d missing",
        cluster.name,
        start.isoformat(),
        end.isoformat(),
        report.records,
        report.created,
        report.updated,
        report.missing,
    )
    return report


def _running_scope(cluster: Cluster, report: SyncReport, now: datetime) -> Scope:
    """The hours a sync's running jobs newly held: from the hour their record was last read (or their start)
    to the hour of this read, inclusive."""
    running = Job.objects.filter(pk__in=report.running_job_ids)
    since = report.running_read_before or min(j.scheduler_start for j in running if j.scheduler_start)
    first = since.replace(minute=0, second=0, microsecond=0)
    return Scope(
        cluster_ids=frozenset([cluster.pk]),
        start=first,
        end=now.replace(minute=0, second=0, microsecond=0) + HOUR,
        job_ids=report.running_job_ids,
    )


def sync_windows(start: datetime, end: datetime, *, step: timedelta = DAY) -> list[tuple[datetime, datetime]]:
    """[start, end) cut into windows of at most `step`."""
    windows, first = [], start
    while first < end:
        windows.append((first, min(first + step, end)))
        first += step
    return windows


def schedulers_catch_up(*, now: datetime | None = None) -> list[SyncReport]:
    """What beat runs: for every cluster with a scheduler, sync from its watermark less the look-back
    (FLEETWATT_SCHEDULER_LOOKBACK_H, re-read each time so that jobs which end later get their final state),
    or from 24 h ago on its first sync, to now, a day at a time. An unreadable scheduler is recorded and
    left for the next run (from where its watermark stayed); the other clusters go on, whatever failed (a
    database that cannot be reached excepted: the task is retried)."""
    now = now or timezone.now()
    lookback = timedelta(hours=settings.FLEETWATT_SCHEDULER_LOOKBACK_H)
    reports: list[SyncReport] = []
    for cluster in scheduler_clusters_select(None):
        mark = cluster.scheduler_synced_through
        first = mark - lookback if mark else now - FIRST_SYNC
        try:
            for start, end in sync_windows(first, now):
                reports.append(scheduler_sync(cluster=cluster, start=start, end=end, now=now))
        except SchedulerUnavailable:
            continue  # recorded and logged by scheduler_sync
        except DATABASE_UNAVAILABLE:
            raise
        except Exception as exc:  # a fault of this cluster's (its records, a bug they reach): not the others'
            status = f"cluster {cluster.name}: the sync failed: {type(exc).__name__}: {one_line(str(exc))}"
            log.exception("scheduler sync: %s; nothing written, synced through %s", status, mark)
            schedulers.scheduler_status_record(cluster=cluster, status=status)
    return reports
