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
from django.utils import timezone

from apps.core import locks
from apps.core.db.bulk import columns_upsert, rows_update
from apps.core.kept import data_changed
from apps.fleet.models import Cluster, Gpu, Node
from apps.fleet.selectors import JobIdentity, TeamResolver
from apps.jobs.identity import key_storable, text_storable
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy, JobWorkHour, Source

from .hour import HourResult, JobMeta, MeterlessGpu, UnclaimedPod
from .models import GpuHour, IngestedHour, IngestWatermark
from .selectors import ingested_through
from .work import UnjoinedWork, WorkRow

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)


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


def cluster_write_lock(*, cluster: Cluster) -> None:
    """One transaction at a time writes a cluster's rows and derives from them (an ingested hour, a scheduler
    sync): the estimates of a sync span many hours, an ingest's job rows many jobs, and two writers taking
    their row locks in different orders would deadlock. Taken before the first write; held to the end of
    the transaction (re-entrant within it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.CLUSTER_WRITE, cluster.pk])


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
    jobs whose team or user this changed (their rule or their identity moved them; a team's splits by user read
    each job's days under its user, apps.rollups.models.JobDay)."""
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
            if job.team_id != values["team_id"] or job.user != values["user"]:
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
    team_moved_job_ids: set[int] = field(default_factory=set)  # jobs this write charged to another team or user
    work_without_job: list[WorkRow] = field(default_factory=list)  # work of jobs the cluster does not have


def hour_rows_write(
    *, cluster: Cluster, hour: datetime, result: HourResult, teams: TeamResolver, work: Sequence[WorkRow] = ()
) -> HourWrite:
    """Replace the cluster-hour's rows by what the source answered: upsert on natural keys, and drop the
    rows the new answer no longer has. Call under cluster_hour_lock, in the transaction that derives."""
    gpus, new_nodes = _gpus_upsert(cluster, result)
    sources = {r.job_key: r.source for r in result.job_hours}
    jobs, moved = _jobs_upsert(cluster, result.jobs.values(), sources, teams)
    previous_job_ids = _hour_estimates_drop(cluster, hour)
    job_rows, energy_rows = _job_hours_replace(cluster, hour, result, jobs=jobs, gpus=gpus)
    gpu_rows = _gpu_hours_replace(cluster, hour, result, gpus=gpus)
    work_written, work_without_job = _work_rows_write(cluster=cluster, hour=hour, rows=work, jobs=jobs)
    through = ingested_through(cluster, hour)
    affected = previous_job_ids | {j.pk for j in jobs.values()} | _open_ended_job_ids(cluster, through)
    rows = {
        Job._meta.db_table: len(jobs),
        JobGpuHour._meta.db_table: job_rows,
        JobGpuHourEnergy._meta.db_table: energy_rows,
        GpuHour._meta.db_table: gpu_rows,
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


def _hour_estimates_drop(cluster: Cluster, hour: datetime) -> set[int]:
    """Drop the hour's estimates (time nobody saw): they follow from what is measured, and are derived again.
    Returns the jobs that had a row in the hour before this write, estimates included."""
    in_hour_rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour)
    previous_job_ids = set(in_hour_rows.values_list("job_id", flat=True))
    JobGpuHourEnergy.objects.filter(gpu__node__cluster=cluster, hour=hour, method=Method.ESTIMATED).delete()
    in_hour_rows.filter(source=Source.ESTIMATED).delete()
    return previous_job_ids


_JOB_HOUR_FIELDS = (
    "source",
    "energy_j",
    "sampled_s",
    "sm_s",
    "occupancy_s",
    "peak_memory_bytes",
    "job_start",
    "first_seen",
    "last_seen",
)


def _job_hours_replace(
    cluster: Cluster, hour: datetime, result: HourResult, *, jobs: Mapping[str, Job], gpus: Mapping[str, Gpu]
) -> tuple[int, int]:
    """Replace the hour's job-GPU-hour rows and their energy per split method by the answer's: drop what it no
    longer has, upsert the rest on natural keys. Returns how many rows of each the answer holds."""
    # The rows go as columns (apps.core.db.bulk): no model instance per row.
    job_pk = [jobs[r.job_key].pk for r in result.job_hours]
    gpu_pk = [gpus[r.uuid].pk for r in result.job_hours]
    hour_rows = _job_hour_columns(hour, result, job_pk=job_pk, gpu_pk=gpu_pk)
    energy = [
        (j, g, method, joules)
        for j, g, r in zip(job_pk, gpu_pk, result.job_hours, strict=True)
        for method, joules in sorted(r.energy_by_method.items())
    ]
    _job_hours_stale_delete(
        cluster,
        hour,
        keep_hours=set(zip(job_pk, gpu_pk, hour_rows["source"], strict=True)),
        keep_energy={(j, g, method) for j, g, method, _ in energy},
    )
    columns_upsert(
        JobGpuHour, hour_rows, unique_fields=["job", "gpu", "hour", "source"], update_fields=list(_JOB_HOUR_FIELDS)
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
    return len(job_pk), len(energy)


def _job_hour_columns(
    hour: datetime, result: HourResult, *, job_pk: list[int], gpu_pk: list[int]
) -> dict[str, list[Any]]:
    """The answer's job-GPU-hour rows as columns, in the order of `result.job_hours`."""
    return {
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


def _job_hours_stale_delete(
    cluster: Cluster,
    hour: datetime,
    *,
    keep_hours: set[tuple[int, int, str]],
    keep_energy: set[tuple[int, int, str]],
) -> None:
    """Delete the hour's job-GPU-hour rows (job, GPU, source) and energy rows (job, GPU, method) the answer no
    longer has."""
    in_hour_rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour)
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


_GPU_HOUR_FIELDS = (
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
)


def _gpu_hours_replace(cluster: Cluster, hour: datetime, result: HourResult, *, gpus: Mapping[str, Gpu]) -> int:
    """Replace the hour's GPU-hours by the answer's measured ones; their estimates are zero until derived again.
    Returns how many the answer holds."""
    measured = result.gpu_hours
    gpu_hour_pk = [gpus[g.uuid].pk for g in measured]
    GpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour).exclude(gpu_id__any=gpu_hour_pk).delete()
    gpu_columns: dict[str, list[Any]] = {"gpu_id": gpu_hour_pk, "hour": [hour] * len(measured)}
    gpu_columns |= {name: [getattr(g, name) for g in measured] for name in _GPU_HOUR_FIELDS}
    gpu_columns |= {name: [getattr(g.settings, name) for g in measured] for name in GPU_SETTINGS_FIELDS}
    # The hour's estimates follow from what is measured: zero here, derived again.
    gpu_columns |= {"estimated_j": [0.0] * len(measured), "estimated_s": [0.0] * len(measured)}
    columns_upsert(
        GpuHour,
        gpu_columns,
        unique_fields=["gpu", "hour"],
        update_fields=[*_GPU_HOUR_FIELDS, *GPU_SETTINGS_FIELDS, "estimated_j", "estimated_s"],
    )
    return len(measured)


def _open_ended_job_ids(cluster: Cluster, through: datetime) -> set[int]:
    """The cluster's jobs that may have ended before the hour: no end yet, and not seen for two scrapes before the
    end of the latest hour ingested."""
    grace = timedelta(seconds=2 * cluster.scrape_interval_s)
    open_ended = Job.objects.filter(cluster=cluster, end__isnull=True, last_seen__lt=through - grace)
    return set(open_ended.values_list("pk", flat=True))


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
