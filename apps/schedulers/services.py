"""Writes of the scheduler sync: each job's accounting record (a Slurm job's, or a Kubernetes pod's from
kube-state-metrics) stored on fleetwatt's job (DESIGN section 8). apps.pipeline.scheduler reads the records
(apps.schedulers.sources) and runs this in one transaction per cluster and window, with the cluster's
watermark."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Q

from apps.core import locks
from apps.core.kept import data_changed
from apps.fleet.models import Cluster
from apps.fleet.selectors import JobIdentity, TeamResolver
from apps.jobs.models import Job, Source
from apps.jobs.states import JobState

from .slurm import SchedulerJob

# What a record says about a job, written onto every job it describes (the agent's jobs included).
SCHEDULER_FIELDS = [
    "scheduler",
    "state",
    "exit_code",
    "signal",
    "partition",
    "qos",
    "display_id",
    "submitted_at",
    "scheduler_start",
    "scheduler_end",
    "gpus_requested",
    "gpus_allocated",
    "node_list",
    "gpu_indices",
    "group_key",
    "labels",
    "scheduler_seen_at",
    "scheduler_missing",
]
# Who and what the job is, and its span: the agent's word where the agent saw the job (the ingest writes
# them), the scheduler's on the jobs only the scheduler knows.
IDENTITY_FIELDS = ["job_id", "user", "account", "namespace", "pod", "name", "team", "start", "end", "last_seen"]
# What tells a record read again from the one stored: all of it but when it was read.
_COMPARED = [f for f in SCHEDULER_FIELDS if f != "scheduler_seen_at"]
_IDENTITY_COMPARED = [("team_id" if f == "team" else f) for f in IDENTITY_FIELDS]
# The agent's keys of each scheduler's jobs: a window of one scheduler says nothing of the other's jobs.
JOB_KEY_PREFIXES: dict[str, str] = {
    Cluster.Scheduler.SLURM_SACCT: "slurm/",
    Cluster.Scheduler.SLURM_REST: "slurm/",
    Cluster.Scheduler.KUBERNETES: "k8s/",
}


@dataclass(frozen=True)
class SyncReport:
    """What storing one window's records did."""

    cluster: str
    records: int  # records read (stand-ins included)
    created: int  # jobs the agent never saw, created from their record
    updated: int  # existing jobs whose scheduler fields were written
    missing: int  # the agent's jobs marked as absent from a complete window
    job_ids: frozenset[int]  # every job written: created, updated or marked missing
    # What the numbers must follow (apps.pipeline.derive): jobs whose record says something new (created, a
    # field changed, newly missing), and running jobs whose record only moved on in time, with when it had
    # been read before (the hours since then are theirs now). A record read again unchanged derives nothing.
    changed_job_ids: frozenset[int] = frozenset()
    running_job_ids: frozenset[int] = frozenset()
    running_read_before: datetime | None = None


def _job_from_record(cluster: Cluster, record: SchedulerJob, *, seen_at: datetime) -> Job:
    return Job(
        cluster=cluster,
        job_key=record.job_key,
        scheduler=record.scheduler,
        job_id=record.job_id,
        user=record.user,
        account=record.account,
        namespace=record.namespace,
        pod=record.pod,
        name=record.name,
        source=Source.SCHEDULER,
        start=record.start,
        end=record.end,
        last_seen=record.end,
        state=JobState(record.state.value.lower()),
        exit_code=record.exit_code,
        signal=record.signal,
        partition=record.partition,
        qos=record.qos,
        display_id=record.display_id,
        submitted_at=record.submit,
        scheduler_start=record.start,
        scheduler_end=record.end,
        gpus_requested=record.gpus_requested,
        gpus_allocated=record.gpus_allocated,
        node_list=",".join(record.nodes),
        gpu_indices={node: list(indices) for node, indices in record.gpu_indices.items()},
        group_key=record.group_key,
        labels=dict(record.labels),
        scheduler_seen_at=seen_at,
        scheduler_missing=False,
    )


def _latest_records(records: Iterable[SchedulerJob]) -> dict[str, SchedulerJob]:
    """One record per job key, the last one read; slurmdbd's stand-ins are left for the next read, when
    the job's own record has replaced them (docs/schedulers.md)."""
    return {r.job_key: r for r in records if not r.is_stand_in}


def scheduler_records_write(
    *,
    cluster: Cluster,
    records: Iterable[SchedulerJob],
    window_complete: bool,
    teams: TeamResolver,
    start: datetime,
    end: datetime,
    seen_at: datetime,
) -> SyncReport:
    """Store the records of the window [start, end) on the cluster's jobs, by job key: the scheduler's
    fields of the jobs that exist; new jobs (source "scheduler", team from the rules) for the ones the agent
    never saw. When `window_complete` (the whole window was read), the agent's jobs of the cluster's scheduler
    (`slurm/` keys for Slurm, `k8s/` for Kubernetes) seen in the window that no record names are marked
    `scheduler_missing`. Nothing is deleted. Safe to run twice."""
    records = list(records)
    named = {r.job_key for r in records}
    latest = _latest_records(records)
    existing = {
        j.job_key: j
        for j in Job.objects.filter(cluster=cluster, job_key__in=list(latest)).only(
            "id", "job_key", "source", "team_id", "team_locked", "scheduler_seen_at", *_COMPARED, *_IDENTITY_COMPARED
        )
    }
    changed_keys: set[str] = set()
    running_keys: dict[str, datetime | None] = {}
    scheduler_only: list[Job] = []  # new, or known only to the scheduler: every field from the record
    agent_seen: list[Job] = []  # the agent's: the scheduler's fields alone
    for key, record in latest.items():
        job = _job_from_record(cluster, record, seen_at=seen_at)
        known = existing.get(key)
        if known is not None and known.team_locked:
            job.team_id = known.team_id
        else:
            job.team = teams.team_for(
                JobIdentity(
                    scheduler=record.scheduler,
                    user=record.user,
                    account=record.account,
                    namespace=record.namespace,
                    labels=record.labels,
                )
            )
        if known is None or known.source == Source.SCHEDULER:
            scheduler_only.append(job)
            compared = [*_COMPARED, *_IDENTITY_COMPARED]
        else:
            job.source = known.source
            agent_seen.append(job)
            compared = _COMPARED
        if known is None or any(getattr(known, name) != getattr(job, name) for name in compared):
            changed_keys.add(key)
        elif job.scheduler_end is None and job.scheduler_start is not None:
            running_keys[key] = known.scheduler_seen_at
    # A conflict here is a job the ingest created since the read above: only the scheduler's fields then. Its
    # team stays the agent's word; the ingest of its later hours resolves it with the record's labels.
    Job.objects.bulk_create(
        agent_seen, update_conflicts=True, unique_fields=["cluster", "job_key"], update_fields=SCHEDULER_FIELDS
    )
    Job.objects.bulk_create(
        scheduler_only,
        update_conflicts=True,
        unique_fields=["cluster", "job_key"],
        update_fields=[*SCHEDULER_FIELDS, *IDENTITY_FIELDS],
    )
    written = {j.pk for j in [*agent_seen, *scheduler_only]}
    if written:
        data_changed(by_ingest=True)  # the jobs list shows the scheduler's record

    missing_ids: set[int] = set()
    for source in cluster.scheduler_sources() if window_complete else []:
        prefix = JOB_KEY_PREFIXES.get(source)
        if prefix is None:
            continue
        unnamed = (
            Job.objects.filter(cluster=cluster, job_key__startswith=prefix, start__lt=end)
            .exclude(source=Source.SCHEDULER)
            .exclude(job_key__in=list(named))
            .filter(Q(last_seen__gte=start) | Q(last_seen__isnull=True))
        )
        if source == Cluster.Scheduler.KUBERNETES:
            # The agent keys a pod it could not name `k8s/pod-uid/<uid>` (its job_id the uid): not missing.
            unnamed = unnamed.exclude(job_id__in=[r.job_id for r in records if r.job_id])
        missing_ids |= set(unnamed.values_list("id", flat=True))
    newly = Job.objects.filter(id__in=missing_ids, scheduler_missing=False)
    newly_missing = set(newly.values_list("id", flat=True))
    newly.update(scheduler_missing=True)

    created = sum(1 for key in latest if key not in existing)
    by_key = {j.job_key: j.pk for j in [*agent_seen, *scheduler_only]}
    read_before = [t for t in running_keys.values() if t is not None]
    return SyncReport(
        cluster=cluster.name,
        records=len(records),
        created=created,
        updated=len(latest) - created,
        missing=len(missing_ids),
        job_ids=frozenset(written | missing_ids),
        changed_job_ids=frozenset({by_key[k] for k in changed_keys} | newly_missing),
        running_job_ids=frozenset(by_key[k] for k in running_keys),
        running_read_before=min(read_before) if read_before else None,
    )


def scheduler_status_record(*, cluster: Cluster, status: str) -> None:
    """The cluster's last sync error ("" when it went well), for the admin's cluster page."""
    Cluster.objects.filter(pk=cluster.pk).update(scheduler_status=status)
    cluster.scheduler_status = status


def scheduler_watermark_advance(*, cluster: Cluster, through: datetime) -> None:
    """The cluster's accounting has been read up to `through`; a watermark never moves back (a re-read of an
    older window leaves it where it is)."""
    Cluster.objects.filter(pk=cluster.pk).filter(
        Q(scheduler_synced_through__isnull=True) | Q(scheduler_synced_through__lt=through)
    ).update(scheduler_synced_through=through)
    cluster.refresh_from_db(fields=["scheduler_synced_through"])


def cluster_sync_lock(*, cluster: Cluster) -> None:
    """Serialise the syncs of one cluster until the transaction ends (a beat run and a command)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.SCHEDULER_SYNC, cluster.pk])
