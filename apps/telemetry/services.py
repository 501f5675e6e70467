"""Ingest: one closed cluster-hour from Prometheus into Postgres, in one transaction, idempotently."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.carbon.services import footprints_refresh, job_groups_assign, node_server_types_apply
from apps.core.bulk import rows_update, rows_upsert
from apps.fleet.models import Cluster, Gpu, Node
from apps.fleet.services import JobIdentity, TeamResolver, default_cluster_ensure
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.jobs.services import jobs_summary_refresh
from apps.waste.services import gpu_hour_flags_replace

from . import promql
from .fetch import hour_fetch
from .hour import HourResult, JobMeta, hour_compute
from .models import GpuHour, IngestedHour, IngestWatermark
from .prometheus import PrometheusReader, PrometheusUnavailable

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)


class IngestError(Exception):
    """Bad input to the ingest (range, cluster); nothing was written."""


@dataclass
class HourReport:
    cluster: str
    hour: datetime
    gpus: int
    jobs: int
    query_count: int
    prometheus_s: float
    duration_s: float
    derive_s: float = 0.0  # of which: footprints, findings and teams' daily sums of the hour


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


def clusters_select(name: str | None) -> list[Cluster]:
    """The named cluster, or every cluster (the default one from settings included)."""
    default_cluster_ensure()
    if name is None:
        return list(Cluster.objects.all())
    try:
        return [Cluster.objects.get(name=name)]
    except Cluster.DoesNotExist:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
        raise IngestError(f"Unknown cluster {name!r} (known: {known}).") from None


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


def hour_ingest(*, cluster: Cluster, hour: datetime, reader: PrometheusReader | None = None) -> HourReport:
    """Ingest one closed hour of one cluster. Running it again replaces the hour's rows with the same."""
    started = time.perf_counter()
    own_reader = reader is None
    reader = reader or PrometheusReader(cluster.prometheus_url, timeout_s=settings.FLEETWATT_PROMETHEUS_TIMEOUT_S)
    count0, seconds0 = reader.log.count, reader.log.seconds
    queries = promql.HourQueries(
        cluster_selector=cluster.selector,
        scrape_interval_s=cluster.scrape_interval_s,
        lookback_s=settings.FLEETWATT_COUNTER_LOOKBACK_S,
    )
    try:
        data = hour_fetch(reader=reader, queries=queries, hour_start=_ts(hour))
    finally:
        if own_reader:
            reader.close()
    result = hour_compute(data)
    with transaction.atomic():
        _cluster_hour_lock(cluster, hour)
        affected = _hour_write(cluster=cluster, hour=hour, result=result)
        derive_started = time.perf_counter()
        _hour_derive(cluster=cluster, hour=hour, job_ids=affected)
        derive_s = time.perf_counter() - derive_started
        report = HourReport(
            cluster=cluster.name,
            hour=hour,
            gpus=len(result.gpu_hours),
            jobs=len({r.job_key for r in result.job_hours}),
            query_count=reader.log.count - count0,
            prometheus_s=reader.log.seconds - seconds0,
            duration_s=time.perf_counter() - started,
            derive_s=derive_s,
        )
        IngestedHour.objects.update_or_create(
            cluster=cluster,
            hour=hour,
            defaults={
                "query_count": report.query_count,
                "duration_s": report.duration_s,
                "prometheus_s": report.prometheus_s,
                "stats": {"gpus": report.gpus, "jobs": report.jobs},
            },
        )
        _watermark_advance(cluster)
    return report


def _cluster_hour_lock(cluster: Cluster, hour: datetime) -> None:
    """Two workers on the same cluster-hour take turns (the second then rewrites the same rows)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [cluster.pk, int(_ts(hour) // 3600)])


def _gpus_upsert(cluster: Cluster, result: HourResult) -> dict[str, Gpu]:
    """Create the nodes and GPUs first seen in this hour; move or rename those that changed."""
    hostnames = sorted({g.hostname for g in result.gpus.values()})
    nodes = {n.hostname: n for n in Node.objects.filter(cluster=cluster, hostname__in=hostnames)}
    missing = [Node(cluster=cluster, hostname=h) for h in hostnames if h not in nodes]
    if missing:
        Node.objects.bulk_create(missing, ignore_conflicts=True, unique_fields=["cluster", "hostname"])
        node_server_types_apply(cluster_id=cluster.pk, only_unset=True)
        nodes = {n.hostname: n for n in Node.objects.filter(cluster=cluster, hostname__in=hostnames)}
    gpus = {g.uuid: g for g in Gpu.objects.filter(uuid__in=list(result.gpus))}
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
        gpus = {g.uuid: g for g in Gpu.objects.filter(uuid__in=list(result.gpus))}
    rows_update(changed, ["node", "index", "model_name"])
    return gpus


def _jobs_upsert(cluster: Cluster, metas: Iterable[JobMeta], sources: dict[str, str]) -> dict[str, Job]:
    """Create the jobs first seen in this hour, update the metadata of those whose labels changed."""
    metas = list(metas)
    existing = {j.job_key: j for j in Job.objects.filter(cluster=cluster, job_key__in=[m.job_key for m in metas])}
    resolver = TeamResolver(cluster=cluster)
    fields = ["scheduler", "job_id", "user", "account", "namespace", "pod", "name", "team", "source"]
    new, changed = [], []
    for m in metas:
        team = resolver.team_for(
            JobIdentity(scheduler=m.scheduler, user=m.user, account=m.account, namespace=m.namespace)
        )
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
            new.append(Job(cluster=cluster, job_key=m.job_key, **values))
        elif any(getattr(job, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(job, k, v)
            changed.append(job)
    Job.objects.bulk_create(new, ignore_conflicts=True, unique_fields=["cluster", "job_key"])
    rows_update(changed, fields)
    if new:
        existing.update(
            (j.job_key, j) for j in Job.objects.filter(cluster=cluster, job_key__in=[j.job_key for j in new])
        )
    return existing


def _hour_write(*, cluster: Cluster, hour: datetime, result: HourResult) -> set[int]:
    """The hour's rows, and the summaries of the jobs they touch; returns those jobs' ids."""
    gpus = _gpus_upsert(cluster, result)
    sources = {r.job_key: r.source for r in result.job_hours}
    jobs = _jobs_upsert(cluster, result.jobs.values(), sources)

    in_hour_rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour)
    previous_job_ids = set(in_hour_rows.values_list("job_id", flat=True))

    hour_rows = [
        JobGpuHour(
            job=jobs[r.job_key],
            gpu=gpus[r.uuid],
            hour=hour,
            source=r.source,
            energy_j=r.energy_j,
            sampled_s=r.sampled_s,
            sm_s=r.sm_s,
            occupancy_s=r.occupancy_s,
            peak_memory_bytes=r.peak_memory_bytes,
            job_start=_dt(r.job_start),
            first_seen=_dt(r.first_seen),
            last_seen=_dt(r.last_seen),
        )
        for r in result.job_hours
    ]
    energy_rows = [
        JobGpuHourEnergy(job=jobs[r.job_key], gpu=gpus[r.uuid], hour=hour, method=method, energy_j=joules)
        for r in result.job_hours
        for method, joules in sorted(r.energy_by_method.items())
    ]
    # Replace the hour: drop what the new answer no longer has, upsert the rest on natural keys.
    keep_hours = {(row.job.pk, row.gpu.pk) for row in hour_rows}
    keep_energy = {(row.job.pk, row.gpu.pk, row.method) for row in energy_rows}
    stale = [pk for pk, j, g in in_hour_rows.values_list("pk", "job_id", "gpu_id") if (j, g) not in keep_hours]
    JobGpuHour.objects.filter(pk__in=stale).delete()
    energy_in_hour = JobGpuHourEnergy.objects.filter(gpu__node__cluster=cluster, hour=hour)
    stale = [
        pk
        for pk, j, g, m in energy_in_hour.values_list("pk", "job_id", "gpu_id", "method")
        if (j, g, m) not in keep_energy
    ]
    JobGpuHourEnergy.objects.filter(pk__in=stale).delete()
    rows_upsert(
        hour_rows,
        unique_fields=["job", "gpu", "hour"],
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
    rows_upsert(energy_rows, unique_fields=["job", "gpu", "hour", "method"], update_fields=["energy_j"])

    gpu_hour_rows = [
        GpuHour(
            gpu=gpus[g.uuid],
            hour=hour,
            source=g.source,
            device_energy_j=g.device_energy_j,
            agent_energy_j=g.agent_energy_j,
            dcgm_energy_j=g.dcgm_energy_j,
            jobs_energy_j=g.jobs_energy_j,
            idle_energy_j=g.idle_energy_j,
            unattributed_j=g.unattributed_j,
            residual_j=g.residual_j,
            residual_ratio=g.residual_ratio,
            sampled_s=g.sampled_s,
            occupied_s=g.occupied_s,
            counter_resets=g.counter_resets,
        )
        for g in result.gpu_hours
    ]
    GpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour).exclude(
        gpu__in=[row.gpu for row in gpu_hour_rows]
    ).delete()
    rows_upsert(
        gpu_hour_rows,
        unique_fields=["gpu", "hour"],
        update_fields=[
            "source",
            "device_energy_j",
            "agent_energy_j",
            "dcgm_energy_j",
            "jobs_energy_j",
            "idle_energy_j",
            "unattributed_j",
            "residual_j",
            "residual_ratio",
            "sampled_s",
            "occupied_s",
            "counter_resets",
        ],
    )
    gpu_hour_flags_replace(cluster=cluster, hour=hour, rows=gpu_hour_rows)
    through = _ingested_through(cluster, hour)
    # Jobs that were in the hour before, are in it now, or may have ended before it.
    grace = timedelta(seconds=2 * cluster.scrape_interval_s)
    open_ended = Job.objects.filter(cluster=cluster, end__isnull=True, last_seen__lt=through - grace)
    affected = previous_job_ids | {j.pk for j in jobs.values()} | set(open_ended.values_list("pk", flat=True))
    jobs_summary_refresh(job_ids=affected, ingested_through=through)
    return affected


def _hour_derive(*, cluster: Cluster, hour: datetime, job_ids: set[int]) -> None:
    """What follows from the hour's rows, in the same transaction: job groups, footprints (carbon, cost),
    findings, and the teams' daily sums."""
    job_groups_assign(job_ids=job_ids)
    footprints_refresh(cluster_ids=[cluster.pk], start=hour, end=hour + HOUR)


def _ingested_through(cluster: Cluster, hour: datetime) -> datetime:
    """The end of the latest hour ingested for the cluster, this one included."""
    latest = IngestedHour.objects.filter(cluster=cluster).order_by("-hour").values_list("hour", flat=True).first()
    return max(hour, latest) + HOUR if latest else hour + HOUR


def _watermark_advance(cluster: Cluster) -> None:
    """Move the watermark over every contiguous ingested hour from where it stands."""
    mark = IngestWatermark.objects.select_for_update().filter(cluster=cluster).first()
    ingested = IngestedHour.objects.filter(cluster=cluster)
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


ProgressFn = Callable[[HourReport], None]


def range_ingest(
    *, clusters: list[Cluster], start: datetime, end: datetime, progress: ProgressFn | None = None
) -> list[HourReport]:
    """Ingest every closed hour in [start, end) of each cluster, one transaction per cluster-hour.

    Stops at the first unreachable Prometheus (PrometheusUnavailable propagates); hours already
    done stay done, the failed one wrote nothing.
    """
    ingest_range_validate(start, end)
    reports = []
    for cluster in clusters:
        reader = PrometheusReader(cluster.prometheus_url, timeout_s=settings.FLEETWATT_PROMETHEUS_TIMEOUT_S)
        try:
            for hour in hours_between(start, end):
                report = hour_ingest(cluster=cluster, hour=hour, reader=reader)
                reports.append(report)
                if progress:
                    progress(report)
        finally:
            reader.close()
    return reports


def last_closed_hour(now: datetime | None = None) -> datetime:
    """The latest hour whose scrapes have all landed (a short settling delay after it ends)."""
    now = now or timezone.now()
    settle = timedelta(seconds=max(60, 2 * settings.FLEETWATT_SCRAPE_INTERVAL_S))
    return hour_floor(now - settle) - HOUR


def closed_hours_ingest(*, now: datetime | None = None) -> list[HourReport]:
    """What beat runs each hour: for every cluster, every hour from its watermark to the last closed
    one (the last closed hour alone when the cluster has no watermark yet). An unreachable cluster is
    logged and left for the next run; the others go on."""
    target = last_closed_hour(now)
    reports: list[HourReport] = []
    for cluster in clusters_select(None):
        if not _try_cluster_lock(cluster):
            log.info("cluster %s: another worker is catching up, skipping", cluster.name)
            continue
        try:
            mark = IngestWatermark.objects.filter(cluster=cluster).first()
            first = mark.ingested_through if mark else target
            hours = hours_between(first, target + HOUR)[: settings.FLEETWATT_CATCHUP_MAX_HOURS]
            reader = PrometheusReader(cluster.prometheus_url, timeout_s=settings.FLEETWATT_PROMETHEUS_TIMEOUT_S)
            try:
                for hour in hours:
                    reports.append(hour_ingest(cluster=cluster, hour=hour, reader=reader))
            except PrometheusUnavailable as exc:
                log.warning("cluster %s: %s; will catch up from %s next run", cluster.name, exc, hour.isoformat())
            finally:
                reader.close()
        finally:
            _cluster_unlock(cluster)
    return reports


_CATCHUP_LOCK = 0x66770000  # advisory lock namespace for per-cluster catch-up


def _try_cluster_lock(cluster: Cluster) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_CATCHUP_LOCK, cluster.pk])
        return bool(cursor.fetchone()[0])


def _cluster_unlock(cluster: Cluster) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_CATCHUP_LOCK, cluster.pk])
