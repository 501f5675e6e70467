"""Writes of the ingest: one cluster-hour's rows (GPUs, jobs, job-GPU-hours, GPU-hours) replaced by what
the source answered, the record of ingested hours and the watermark. apps.pipeline.ingest runs them in
one transaction, with the derivations that follow."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q, Sum
from django.utils import timezone

from apps.core import locks
from apps.core.db.bulk import columns_upsert, rows_update
from apps.core.generation import data_changed
from apps.core.units.aggregates import exact_sum
from apps.fleet.models import Cluster, Gpu, Node
from apps.fleet.selectors import JobIdentity, TeamResolver
from apps.jobs.identity import key_storable, text_storable
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy, JobWorkHour, Source

from .guard import HourTotals
from .hour import HourResult, JobMeta, MeterlessGpu, UnclaimedPod
from .models import GpuHour, IngestedHour, IngestWatermark
from .unobserved import (
    MIN_CLAIM_S,
    GpuHourGap,
    SeenPart,
    Sighting,
    agent_span,
    bridged_gap,
    gap_estimates,
    gap_totals,
    held_seconds,
)
from .work import UnjoinedWork, WorkRow

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)


class IngestError(Exception):
    """Bad input to the ingest (range, cluster); nothing was written."""


class SourceLossError(IngestError):
    """The source no longer holds what is stored for an hour; nothing was written."""


@dataclass
class HourReport:
    cluster: str
    hour: datetime
    gpus: int
    jobs: int
    query_count: int
    prometheus_s: float
    duration_s: float
    derive_s: float = 0.0  # of which: the derivations (apps.pipeline.derive) of the hour
    derive_steps_s: dict[str, float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # rows written, per table (fleetwatt_ingest_last_rows)
    meterless: list[MeterlessGpu] = field(default_factory=list)  # GPUs seen with no energy meter: no energy stored
    unclaimed: list[UnclaimedPod] = field(default_factory=list)  # pods on GPUs that requested none: not charged
    # Work counted by series no label ties to a job, or tied to a job the cluster does not have: not stored.
    work_without_job: list[UnjoinedWork] = field(default_factory=list)


def _ts(dt: datetime) -> float:
    return dt.timestamp()


def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts is not None else None


def hour_floor(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hours_between(start: datetime, end: datetime) -> list[datetime]:
    hours, h = [], start
    while h < end:
        hours.append(h)
        h += HOUR
    return hours


def ingest_range_validate(start: datetime, end: datetime, *, now: datetime | None = None) -> None:
    now = now or timezone.now()
    for label, value in (("--start", start), ("--end", end)):
        if value.tzinfo is None:
            raise IngestError(f"{label} {value.isoformat()} has no time zone; add Z or an offset.")
        if value != hour_floor(value):
            raise IngestError(f"{label} {value.isoformat()} is not a whole hour.")
    if start >= end:
        raise IngestError(f"--start {start.isoformat()} must be before --end {end.isoformat()}.")
    if end > hour_floor(now):
        raise IngestError(f"--end {end.isoformat()} is in an hour that has not closed yet (now {now.isoformat()}).")
    hours = int((end - start) / HOUR)
    if hours > settings.FLEETWATT_INGEST_MAX_HOURS:
        raise IngestError(
            f"{start.isoformat()} to {end.isoformat()} is {hours:,} hours; one run covers at most "
            f"{settings.FLEETWATT_INGEST_MAX_HOURS:,} (FLEETWATT_INGEST_MAX_HOURS): split the range."
        )


def stored_hour_totals(*, cluster: Cluster, hour: datetime) -> HourTotals:
    """What is stored for the cluster-hour: its GPUs, job rows and the GPUs' energy."""
    if not IngestedHour.objects.filter(cluster=cluster, hour=hour).exists():
        return HourTotals()  # rows are only ever written with this record, in one transaction
    hours = GpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour)
    energy = hours.aggregate(energy_j=Sum("device_energy_j"))["energy_j"] or 0.0
    job_rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour).exclude(source=Source.ESTIMATED).count()
    return HourTotals(
        gpus=frozenset(hours.values_list("gpu__uuid", flat=True)),
        job_rows=job_rows,
        device_energy_j=energy,
        work_rows=JobWorkHour.objects.filter(hour=hour, job__cluster=cluster).count(),
    )


def fresh_hour_totals(result: HourResult, work: Sequence[WorkRow] = ()) -> HourTotals:
    """What the source answered for the hour, counted as stored_hour_totals counts (the work rows, before those
    of jobs the cluster does not have are left out: at most what is stored)."""
    return HourTotals(
        gpus=frozenset(g.uuid for g in result.gpu_hours),
        job_rows=len(result.job_hours),
        device_energy_j=sum(g.device_energy_j for g in result.gpu_hours),
        work_rows=len(work),
    )


def cluster_retention_record(*, cluster: Cluster, retention: timedelta | None) -> None:
    """Remember how long the cluster's source keeps samples (the admin shows which hours only we hold)."""
    seconds = int(retention.total_seconds()) if retention else None
    if cluster.source_retention_s != seconds:
        cluster.source_retention_s = seconds
        cluster.save(update_fields=["source_retention_s"])


def cluster_hour_lock(*, cluster: Cluster, hour: datetime) -> None:
    """Two workers on the same cluster-hour take turns (the second then rewrites the same rows). Its key, the
    cluster's id and the hour, is listed with the others in apps.core.locks."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [cluster.pk, int(_ts(hour) // 3600)])


def _gpus_upsert(cluster: Cluster, result: HourResult) -> tuple[dict[str, Gpu], bool]:
    """Create the nodes and GPUs first seen in this hour; move or rename those that changed. Also says
    whether a node was new (it needs a server type)."""
    hostnames = sorted({g.hostname for g in result.gpus.values()})
    nodes = {n.hostname: n for n in Node.objects.filter(cluster=cluster, hostname__in=hostnames)}
    missing = [Node(cluster=cluster, hostname=h) for h in hostnames if h not in nodes]
    if missing:
        Node.objects.bulk_create(missing, ignore_conflicts=True, unique_fields=["cluster", "hostname"])
        nodes = {n.hostname: n for n in Node.objects.filter(cluster=cluster, hostname__in=hostnames)}
    gpus = {g.uuid: g for g in Gpu.objects.filter(uuid__any=list(result.gpus))}
    new, changed = [], []
    for ref in result.gpus.values():
        gpu = gpus.get(ref.uuid)
        node = nodes[ref.hostname]
        if gpu is None:
            new.append(Gpu(node=node, uuid=ref.uuid, index=ref.index, model_name=ref.model_name))
        elif (gpu.node_id, gpu.index) != (node.pk, ref.index) or (ref.model_name and ref.model_name != gpu.model_name):
            gpu.node, gpu.index, gpu.model_name = node, ref.index, ref.model_name or gpu.model_name
            changed.append(gpu)
    if new:
        Gpu.objects.bulk_create(new, ignore_conflicts=True, unique_fields=["uuid"])
        gpus = {g.uuid: g for g in Gpu.objects.filter(uuid__any=list(result.gpus))}
    rows_update(changed, ["node", "index", "model_name"])
    return gpus, bool(missing)


def _jobs_upsert(
    cluster: Cluster, metas: Iterable[JobMeta], sources: dict[str, str], teams: TeamResolver
) -> tuple[dict[str, Job], set[int]]:
    """Create the jobs first seen in this hour, update the metadata of those whose labels changed. Also: the
    jobs whose team this changed (their rule or their identity moved them)."""
    metas = list(metas)
    fields = ["scheduler", "job_id", "user", "account", "namespace", "pod", "name", "team", "source"]
    # Only what is compared and written here: a job has some sixty columns, and the hour's hundreds of jobs
    # were loaded whole (the caller reads only their primary keys).
    loaded = Job.objects.filter(cluster=cluster).only("job_key", "labels", "team_locked", *fields)
    existing = {j.job_key: j for j in loaded.filter(job_key__any=[m.job_key for m in metas])}
    new: list[dict[str, Any]] = []  # the columns of each job first seen
    changed = []
    moved: set[int] = set()
    for m in metas:
        known = existing.get(m.job_key)
        # A pod's labels come from its scheduler record only (kube-state-metrics): kept for its team rules.
        labels = known.labels if known is not None and isinstance(known.labels, dict) else {}
        identity = JobIdentity(
            scheduler=m.scheduler, user=m.user, account=m.account, namespace=m.namespace, labels=labels
        )
        team = teams.team_for(identity)
        values = {
            "scheduler": m.scheduler,
            "job_id": m.job_id,
            "user": m.user,
            "account": m.account,
            "namespace": m.namespace,
            "pod": m.pod,
            "name": m.name,
            "team_id": team.pk,
            "source": sources.get(m.job_key, "agent"),
        }
        job = existing.get(m.job_key)
        if job is not None and job.team_locked:  # an admin charged it elsewhere: keep that
            values["team_id"] = job.team_id
        if job is None:
            new.append({"cluster_id": cluster.pk, "job_key": m.job_key, **values})
        elif any(getattr(job, k) != v for k, v in values.items()):
            if job.team_id != values["team_id"]:
                moved.add(job.pk)
            for k, v in values.items():
                setattr(job, k, v)
            changed.append(job)
    # As columns (apps.core.db.bulk): Django's bulk_create compiled sixty columns of every new job into the
    # statement's text, about as long as the rest of the writes of the hour.
    columns_upsert(
        Job,
        {name: [job[name] for job in new] for name in new[0]} if new else {},
        unique_fields=["cluster", "job_key"],
        update_fields=[],  # a job another ingest created meanwhile is left as it is
    )
    rows_update(changed, fields)
    if new or changed:
        data_changed(by_ingest=True)  # the jobs list shows them (the derivation that follows moves it on again)
    if new:
        existing.update((j.job_key, j) for j in loaded.filter(job_key__any=[job["job_key"] for job in new]))
    return existing, moved


GPU_SETTINGS_FIELDS = ("power_limit_w", "power_limit_min_w", "power_limit_max_w", "sm_clock_mhz")


@dataclass(frozen=True)
class HourWrite:
    """What replacing an hour's rows touched."""

    job_ids: set[int]  # jobs that were in the hour, are in it now, or may have ended before it
    ingested_through: datetime  # the end of the latest hour ingested for the cluster, this one included
    new_nodes: bool
    rows: dict[str, int] = field(default_factory=dict)  # rows written (inserted or updated), per table
    team_moved_job_ids: set[int] = field(default_factory=set)  # jobs this write charged to another team
    work_without_job: list[WorkRow] = field(default_factory=list)  # work of jobs the cluster does not have


def hour_rows_write(
    *, cluster: Cluster, hour: datetime, result: HourResult, teams: TeamResolver, work: Sequence[WorkRow] = ()
) -> HourWrite:
    """Replace the cluster-hour's rows by what the source answered: upsert on natural keys, and drop the
    rows the new answer no longer has. Call under cluster_hour_lock, in the transaction that derives."""
    gpus, new_nodes = _gpus_upsert(cluster, result)
    sources = {r.job_key: r.source for r in result.job_hours}
    jobs, moved = _jobs_upsert(cluster, result.jobs.values(), sources, teams)

    in_hour_rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour)
    previous_job_ids = set(in_hour_rows.values_list("job_id", flat=True))
    # The hour's estimates (time nobody saw) follow from what is measured: dropped here, derived again.
    JobGpuHourEnergy.objects.filter(gpu__node__cluster=cluster, hour=hour, method=Method.ESTIMATED).delete()
    in_hour_rows.filter(source=Source.ESTIMATED).delete()

    # The rows go as columns (apps.core.db.bulk): no model instance per row.
    job_pk = [jobs[r.job_key].pk for r in result.job_hours]
    gpu_pk = [gpus[r.uuid].pk for r in result.job_hours]
    hour_rows: dict[str, list[Any]] = {
        "job_id": job_pk,
        "gpu_id": gpu_pk,
        "hour": [hour] * len(job_pk),
        "source": [r.source for r in result.job_hours],
        "energy_j": [r.energy_j for r in result.job_hours],
        "sampled_s": [r.sampled_s for r in result.job_hours],
        "sm_s": [r.sm_s for r in result.job_hours],
        "occupancy_s": [r.occupancy_s for r in result.job_hours],
        "peak_memory_bytes": [r.peak_memory_bytes for r in result.job_hours],
        "job_start": [_dt(r.job_start) for r in result.job_hours],
        "first_seen": [_dt(r.first_seen) for r in result.job_hours],
        "last_seen": [_dt(r.last_seen) for r in result.job_hours],
    }
    energy = [
        (j, g, method, joules)
        for j, g, r in zip(job_pk, gpu_pk, result.job_hours, strict=True)
        for method, joules in sorted(r.energy_by_method.items())
    ]
    # Replace the hour: drop what the new answer no longer has, upsert the rest on natural keys.
    keep_hours = set(zip(job_pk, gpu_pk, hour_rows["source"], strict=True))
    keep_energy = {(j, g, method) for j, g, method, _ in energy}
    stale = [
        pk
        for pk, j, g, source in in_hour_rows.values_list("pk", "job_id", "gpu_id", "source")
        if (j, g, source) not in keep_hours
    ]
    JobGpuHour.objects.filter(pk__in=stale).delete()
    energy_in_hour = JobGpuHourEnergy.objects.filter(gpu__node__cluster=cluster, hour=hour)
    stale = [
        pk
        for pk, j, g, m in energy_in_hour.values_list("pk", "job_id", "gpu_id", "method")
        if (j, g, m) not in keep_energy
    ]
    JobGpuHourEnergy.objects.filter(pk__in=stale).delete()
    columns_upsert(
        JobGpuHour,
        hour_rows,
        unique_fields=["job", "gpu", "hour", "source"],
        update_fields=[
            "source",
            "energy_j",
            "sampled_s",
            "sm_s",
            "occupancy_s",
            "peak_memory_bytes",
            "job_start",
            "first_seen",
            "last_seen",
        ],
    )
    columns_upsert(
        JobGpuHourEnergy,
        {
            "job_id": [e[0] for e in energy],
            "gpu_id": [e[1] for e in energy],
            "hour": [hour] * len(energy),
            "method": [e[2] for e in energy],
            "energy_j": [e[3] for e in energy],
        },
        unique_fields=["job", "gpu", "hour", "method"],
        update_fields=["energy_j"],
    )

    measured = result.gpu_hours
    gpu_hour_pk = [gpus[g.uuid].pk for g in measured]
    GpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour).exclude(gpu_id__any=gpu_hour_pk).delete()
    gpu_fields = [
        "source",
        "device_energy_j",
        "agent_energy_j",
        "dcgm_energy_j",
        "jobs_energy_j",
        "idle_energy_j",
        "unattributed_j",
        "unobserved_j",
        "unobserved_s",
        "residual_j",
        "residual_ratio",
        "sampled_s",
        "occupied_s",
        "counter_resets",
        "agent_version",
        "contract_gaps",
    ]
    gpu_columns: dict[str, list[Any]] = {"gpu_id": gpu_hour_pk, "hour": [hour] * len(measured)}
    gpu_columns |= {name: [getattr(g, name) for g in measured] for name in gpu_fields}
    gpu_columns |= {name: [getattr(g.settings, name) for g in measured] for name in GPU_SETTINGS_FIELDS}
    # The hour's estimates follow from what is measured: zero here, derived again.
    gpu_columns |= {"estimated_j": [0.0] * len(measured), "estimated_s": [0.0] * len(measured)}
    columns_upsert(
        GpuHour,
        gpu_columns,
        unique_fields=["gpu", "hour"],
        update_fields=[*gpu_fields, *GPU_SETTINGS_FIELDS, "estimated_j", "estimated_s"],
    )
    work_written, work_without_job = _work_rows_write(cluster=cluster, hour=hour, rows=work, jobs=jobs)
    through = ingested_through(cluster, hour)
    # Jobs that were in the hour before, are in it now, or may have ended before it.
    grace = timedelta(seconds=2 * cluster.scrape_interval_s)
    open_ended = Job.objects.filter(cluster=cluster, end__isnull=True, last_seen__lt=through - grace)
    affected = previous_job_ids | {j.pk for j in jobs.values()} | set(open_ended.values_list("pk", flat=True))
    rows = {
        Job._meta.db_table: len(jobs),
        JobGpuHour._meta.db_table: len(job_pk),
        JobGpuHourEnergy._meta.db_table: len(energy),
        GpuHour._meta.db_table: len(measured),
        JobWorkHour._meta.db_table: work_written,
    }
    return HourWrite(
        job_ids=affected,
        ingested_through=through,
        new_nodes=new_nodes,
        rows=rows,
        team_moved_job_ids=moved,
        work_without_job=work_without_job,
    )


_WORK_AMOUNTS = ("output_tokens", "prompt_tokens", "requests", "units")


def _work_rows_write(
    *, cluster: Cluster, hour: datetime, rows: Sequence[WorkRow], jobs: Mapping[str, Job]
) -> tuple[int, list[WorkRow]]:
    """Replace the cluster-hour's work rows (apps.telemetry.work) by those of the answer whose job the cluster has
    (this hour's, or one seen before); the others are returned, not stored: work is tied to a job's energy."""
    keyed = [(key_storable(r.job_key), r) for r in rows]
    known: dict[str, Job] = dict(jobs)
    missing = sorted({key for key, _ in keyed} - set(known))
    if missing:
        known |= {j.job_key: j for j in Job.objects.filter(cluster=cluster, job_key__any=missing).only("pk", "job_key")}
    stored = [(known[key].pk, text_storable(r.model, limit=255)[0], r) for key, r in keyed if key in known]
    in_hour = JobWorkHour.objects.filter(hour=hour, job__cluster=cluster)
    keep = {(job_id, r.engine, model, r.unit) for job_id, model, r in stored}
    stale = [
        pk
        for pk, *natural in in_hour.values_list("pk", "job_id", "engine", "model", "unit")
        if tuple(natural) not in keep
    ]
    JobWorkHour.objects.filter(pk__in=stale).delete()
    columns_upsert(
        JobWorkHour,
        {
            "job_id": [job_id for job_id, _, _ in stored],
            "hour": [hour] * len(stored),
            "engine": [r.engine for _, _, r in stored],
            "model": [model for _, model, _ in stored],
            "unit": [r.unit for _, _, r in stored],
            **{name: [getattr(r, name) for _, _, r in stored] for name in _WORK_AMOUNTS},
        },
        unique_fields=["job", "hour", "engine", "model", "unit"],
        update_fields=list(_WORK_AMOUNTS),
    )
    return len(stored), [r for key, r in keyed if key not in known]


def ingested_hour_record(
    *, cluster: Cluster, hour: datetime, report: HourReport, pending_job_ids: set[int] | None = None
) -> None:
    """Remember that the hour was ingested, with what it took; then move the watermark over it. With
    `pending_job_ids` the hour is written but not derived: it keeps the jobs to derive, and the watermark
    stays before it until its batch is derived (apps.pipeline.fanout)."""
    IngestedHour.objects.update_or_create(
        cluster=cluster,
        hour=hour,
        defaults={
            "query_count": report.query_count,
            "duration_s": report.duration_s,
            "prometheus_s": report.prometheus_s,
            "stats": {
                "gpus": report.gpus,
                "jobs": report.jobs,
                "rows": report.rows,
                "no_energy_meter": [_meterless_stats(g) for g in report.meterless],
                "pods_without_gpu_request": [{"job_key": p.job_key, "gpus": list(p.uuids)} for p in report.unclaimed],
                "work_without_job": [asdict(w) for w in report.work_without_job],
            },
            "derived": pending_job_ids is None,
            "pending_job_ids": sorted(pending_job_ids or ()),
        },
    )
    if pending_job_ids is None:
        watermark_advance(cluster)


def _meterless_stats(gpu: MeterlessGpu) -> dict[str, Any]:
    """What an unmetered GPU's hour keeps: what it lacks, and what is known of it (no energy)."""
    return {
        "uuid": gpu.uuid,
        "hostname": gpu.hostname,
        "missing": list(gpu.missing),
        "utilisation_pct": gpu.utilisation_pct,
        "memory_used_mib": gpu.memory_used_mib,
        "memory_peak_mib": gpu.memory_peak_mib,
        "seen_s": gpu.seen_s,
        "jobs_s": dict(gpu.jobs_s),
    }


def pending_job_ids(*, cluster: Cluster, hour: datetime) -> set[int]:
    """The jobs an earlier write of the hour changed that have not been derived yet (none, usually)."""
    ids = IngestedHour.objects.filter(cluster=cluster, hour=hour, derived=False).values_list(
        "pending_job_ids", flat=True
    )
    return {job_id for row in ids for job_id in row}


def ingested_through(cluster: Cluster, hour: datetime) -> datetime:
    """The end of the latest hour ingested for the cluster, `hour` included."""
    latest = IngestedHour.objects.filter(cluster=cluster).order_by("-hour").values_list("hour", flat=True).first()
    return max(hour, latest) + HOUR if latest else hour + HOUR


def watermark_advance(cluster: Cluster) -> None:
    """Move the watermark over every contiguous ingested and derived hour from where it stands."""
    mark = IngestWatermark.objects.select_for_update().filter(cluster=cluster).first()
    ingested = IngestedHour.objects.filter(cluster=cluster, derived=True)
    if mark is None:
        first = ingested.order_by("hour").values_list("hour", flat=True).first()
        if first is None:
            return
        mark = IngestWatermark(cluster=cluster, ingested_through=first)
    # Only the hours from where it stands: the cluster's whole history would grow with every hour.
    hours = set(ingested.filter(hour__gte=mark.ingested_through).values_list("hour", flat=True))
    through = mark.ingested_through
    closed = last_closed_hour()
    # Only closed hours count: an hour ingested while still open (a test, a curious admin) is ingested
    # again, whole, when beat reaches it.
    while through in hours and through <= closed:
        through += HOUR
    if mark.pk is None or through != mark.ingested_through:
        mark.ingested_through = through
        mark.save()


def last_closed_hour(now: datetime | None = None) -> datetime:
    """The latest hour whose scrapes have all landed (a short settling delay after it ends)."""
    now = now or timezone.now()
    settle = timedelta(seconds=max(60, 2 * settings.FLEETWATT_SCRAPE_INTERVAL_S))
    return hour_floor(now - settle) - HOUR


# --- Time nobody saw: the scheduler's allocation applied to the GPU-hours (DESIGN section 8) -------------


def cluster_write_lock(*, cluster: Cluster) -> None:
    """One transaction at a time writes a cluster's rows and derives from them (an ingested hour, a scheduler
    sync): the estimates of a sync span many hours, an ingest's job rows many jobs, and two writers taking
    their row locks in different orders would deadlock. Taken before the first write; held to the end of
    the transaction (re-entrant within it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.CLUSTER_WRITE, cluster.pk])


@dataclass(frozen=True)
class EstimatesRefresh:
    """What re-deriving a window's estimates touched."""

    job_ids: set[int]  # jobs with an estimate in the window, before or after
    rows: int  # estimated job-GPU-hour rows written
    start: datetime  # where the window began: earlier than asked where its sightings closed a gap before it


def _held_gpus(cluster: Cluster, jobs: list[Job]) -> dict[int, set[int]]:
    """Which of the cluster's GPUs each scheduler job held: those it was measured on (any hour), with its
    allocation's GPU indices per node where recorded, or every GPU of its nodes where its GPU count is
    theirs (a whole-node allocation). Otherwise only those measured, or none (docs/arithmetic.md)."""
    measured: dict[int, set[int]] = {}
    for job_id, gpu_id in (
        JobGpuHour.objects.filter(job_id__any=[j.pk for j in jobs])
        .exclude(source=Source.ESTIMATED)
        .values_list("job_id", "gpu_id")
        .distinct()
        .order_by()
    ):
        measured.setdefault(job_id, set()).add(gpu_id)
    by_node: dict[str, dict[int, int]] = {}
    for gpu_id, hostname, index in Gpu.objects.filter(node__cluster=cluster).values_list(
        "pk", "node__hostname", "index"
    ):
        by_node.setdefault(hostname, {})[index] = gpu_id
    held: dict[int, set[int]] = {}
    for job in jobs:
        gpus = set(measured.get(job.pk, set()))
        indices = job.gpu_indices if isinstance(job.gpu_indices, dict) else {}
        nodes = [n for n in job.node_list.split(",") if n]
        whole_nodes = bool(job.gpus_allocated) and job.gpus_allocated == sum(len(by_node.get(n, {})) for n in nodes)
        for node in nodes:
            on_node = by_node.get(node, {})
            if indices.get(node):
                gpus |= {on_node[i] for i in indices[node] if i in on_node}
            elif whole_nodes:
                gpus |= set(on_node.values())
        if gpus:
            held[job.pk] = gpus
    return held


# How far from a window the agent's sightings of a job are read: a gap longer than this is not bridged.
BRIDGE_LOOKBACK = timedelta(hours=6)


def _agent_sightings(
    cluster: Cluster, start: datetime, end: datetime
) -> dict[tuple[int, int], list[tuple[datetime, Sighting]]]:
    """The agent's rows near [start, end) of the jobs no scheduler record describes, per (job, GPU), by hour: of
    the GPUs with time nobody saw near it only (none, most hours: one cheap query)."""
    near = {"hour__gte": start - BRIDGE_LOOKBACK, "hour__lt": end + BRIDGE_LOOKBACK}
    gaps = GpuHour.objects.filter(gpu__node__cluster=cluster, unobserved_s__gte=MIN_CLAIM_S, **near)
    gpu_ids = sorted(set(gaps.values_list("gpu_id", flat=True).distinct()))
    out: dict[tuple[int, int], list[tuple[datetime, Sighting]]] = {}
    if not gpu_ids:
        return out
    for job_id, gpu_id, hour, first_seen, last_seen, job_start in (
        JobGpuHour.objects.filter(gpu_id__in=gpu_ids, source=Source.AGENT, job__scheduler_start__isnull=True, **near)
        .values_list("job_id", "gpu_id", "hour", "first_seen", "last_seen", "job_start")
        .order_by("hour")
    ):
        out.setdefault((job_id, gpu_id), []).append((hour, Sighting(hour, first_seen, last_seen, job_start)))
    return out


def _bridge_start(sightings: Mapping[tuple[int, int], list[tuple[datetime, Sighting]]], start: datetime) -> datetime:
    """Where a window's re-derivation must begin so that a gap its new sightings close is charged: the hour of
    a job's sighting before the window, where the agent then lost it (a missing hour, or an hour it was not
    seen to the end of)."""
    first = start
    for rows in sightings.values():
        before = [(hour, s) for hour, s in rows if hour < start]
        if not before or not any(hour >= start for hour, _ in rows):
            continue
        hour, last = before[-1]
        lost = hour + HOUR < start or (
            last.last_seen is not None and (hour + HOUR - last.last_seen).total_seconds() >= MIN_CLAIM_S
        )
        if lost:
            first = min(first, hour)
    return first


def unobserved_estimates_refresh(
    *, cluster: Cluster, start: datetime, end: datetime, writing: bool = False
) -> EstimatesRefresh:
    """Re-derive the estimates of the cluster's ingested hours in [start, end) (apps.telemetry.unobserved):
    the estimated job-GPU-hour rows and their `estimated` energy, and each GPU-hour's estimated_j/_s.
    Replaces what was there; the same inputs give the same rows. `writing`: [start, end) are the hours an ingest
    is writing (their rows are there, their record not yet). Where the window's sightings close a gap the agent
    lost a job in before it, the window reaches back to that gap (`EstimatesRefresh.start`)."""
    cluster_write_lock(cluster=cluster)
    sightings = _agent_sightings(cluster, start, end)
    written = set(hours_between(start, end)) if writing else set()
    start = _bridge_start(sightings, start)
    hours = sorted(
        written
        | set(
            IngestedHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end).values_list("hour", flat=True)
        )
    )
    in_cluster = {"gpu__node__cluster": cluster}
    old_rows = JobGpuHour.objects.filter(**in_cluster, hour__gte=start, hour__lt=end, source=Source.ESTIMATED)
    touched = set(old_rows.values_list("job_id", flat=True))
    if touched:  # estimated energy rows are written and deleted with their estimated rows: none without them
        JobGpuHourEnergy.objects.filter(
            **in_cluster, hour__gte=start, hour__lt=end, method=Method.ESTIMATED, job_id__any=sorted(touched)
        ).delete()
        old_rows.delete()
    GpuHour.objects.filter(**in_cluster, hour__gte=start, hour__lt=end).exclude(estimated_j=0, estimated_s=0).update(
        estimated_j=0.0, estimated_s=0.0
    )
    if not hours:
        return EstimatesRefresh(job_ids=touched, rows=0, start=start)
    first, last = hours[0], hours[-1] + HOUR
    holders = list(
        Job.objects.filter(cluster=cluster, scheduler_start__lt=last)
        .filter(Q(scheduler_end__gt=first) | Q(scheduler_end__isnull=True, scheduler_seen_at__gt=first))
        .only(
            "pk", "scheduler_start", "scheduler_end", "scheduler_seen_at", "gpu_indices", "node_list", "gpus_allocated"
        )
    )
    held_gpus = _held_gpus(cluster, holders) if holders else {}
    held: dict[tuple[int, datetime], dict[int, float]] = {}
    for job in holders:
        until = job.scheduler_end or job.scheduler_seen_at
        if job.pk not in held_gpus or job.scheduler_start is None or until is None:
            continue
        for hour in hours:
            seconds = held_seconds(start=job.scheduler_start, end=until, hour=hour)
            if seconds > 0:
                for gpu_id in held_gpus[job.pk]:
                    held.setdefault((gpu_id, hour), {})[job.pk] = seconds
    # The agent's own word where no scheduler's is: a job seen on a GPU before and after a gap held it between.
    bridged: dict[tuple[int, datetime], dict[int, float]] = {}
    for (job_id, gpu_id), by_hour in sightings.items():
        span = agent_span([sighting for _, sighting in by_hour])
        if span is None:
            continue
        for hour in hours:
            seconds = held_seconds(start=span[0], end=span[1], hour=hour)
            if seconds > 0 and (gpu_id, hour) not in held:
                bridged.setdefault((gpu_id, hour), {})[job_id] = seconds
    if not held and not bridged:  # most hours of a cluster whose scheduler is not read and whose agents saw all
        return EstimatesRefresh(job_ids=touched, rows=0, start=start)
    gpu_ids = {gpu_id for gpu_id, _ in held} | {gpu_id for gpu_id, _ in bridged}
    gaps = {
        (g.gpu_id, g.hour): g
        for g in GpuHour.objects.filter(gpu_id__in=gpu_ids, hour__in=hours).only(
            "pk", "gpu_id", "hour", "occupied_s", "unobserved_s", "unobserved_j", "contract_gaps"
        )
    }
    seen: dict[tuple[int, datetime], dict[int, SeenPart]] = {}
    for job_id, gpu_id, hour, sampled_s, occupancy_s, energy_j in (
        JobGpuHour.objects.filter(gpu_id__in=gpu_ids, hour__in=hours)
        .exclude(source=Source.ESTIMATED)
        .values_list("job_id", "gpu_id", "hour", "sampled_s", "occupancy_s", "energy_j")
    ):
        seen.setdefault((gpu_id, hour), {})[job_id] = SeenPart(sampled_s, occupancy_s, energy_j)
    claimants = {j.pk for j in holders} | {job_id for holds in bridged.values() for job_id in holds}
    seen_power_w = {
        r["job_id"]: r["energy"] / r["occupancy"]
        for r in JobGpuHour.objects.filter(job_id__any=sorted(claimants))
        .exclude(source=Source.ESTIMATED)
        .values("job_id")
        .annotate(energy=exact_sum("energy_j"), occupancy=exact_sum("occupancy_s"))
        .order_by()
        if r["occupancy"]
    }
    rows, energy_rows, gpu_hours = [], [], []
    for (gpu_id, hour), holds in sorted((held | bridged).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        record = gaps.get((gpu_id, hour))
        gap = (
            GpuHourGap(
                unoccupied_s=max(0.0, 3600.0 - record.occupied_s),
                unseen_s=record.unobserved_s,
                unobserved_j=record.unobserved_j,
            )
            if record is not None
            else GpuHourGap.unmeasured()
        )
        if (gpu_id, hour) in bridged:
            if record is None or record.contract_gaps:
                continue  # an older agent's sampled time is itself an estimate: no gap to tell from it
            gap = bridged_gap(gap)
        estimates = gap_estimates(gap=gap, held_s=holds, seen=seen.get((gpu_id, hour), {}), seen_power_w=seen_power_w)
        for e in estimates:
            rows.append(
                JobGpuHour(
                    job_id=e.job_id,
                    gpu_id=gpu_id,
                    hour=hour,
                    source=Source.ESTIMATED,
                    energy_j=e.energy_j,
                    occupancy_s=e.occupancy_s,
                )
            )
            if e.energy_j > 0:
                energy_rows.append(
                    JobGpuHourEnergy(
                        job_id=e.job_id, gpu_id=gpu_id, hour=hour, method=Method.ESTIMATED, energy_j=e.energy_j
                    )
                )
        if record is not None and estimates:
            record.estimated_s, record.estimated_j = gap_totals(estimates)
            gpu_hours.append(record)
    JobGpuHour.objects.bulk_create(rows, batch_size=2000)
    JobGpuHourEnergy.objects.bulk_create(energy_rows, batch_size=2000)
    rows_update(gpu_hours, ["estimated_s", "estimated_j"])
    return EstimatesRefresh(job_ids=touched | {r.job_id for r in rows}, rows=len(rows), start=start)
