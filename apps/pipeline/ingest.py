"""The ingest, end to end: fetch a closed cluster-hour from Prometheus, compute its rows, and in one
transaction under the cluster-hour's lock replace the stored rows, derive everything that follows
(apps.pipeline.derive) and move the watermark. Beat's catch-up and the `ingest` command run it hour by
hour; re-running an hour gives the same rows."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.carbon import services as carbon
from apps.fleet import services as fleet
from apps.fleet.models import Cluster
from apps.fleet.selectors import TeamResolver
from apps.telemetry import promql
from apps.telemetry import services as telemetry
from apps.telemetry.fetch import hour_fetch
from apps.telemetry.guard import beyond_retention, source_loss
from apps.telemetry.hour import hour_compute
from apps.telemetry.models import IngestWatermark
from apps.telemetry.prometheus import PrometheusReader, PrometheusUnavailable
from apps.telemetry.services import (
    HOUR,
    HourReport,
    IngestError,
    SourceLossError,
    hours_between,
    ingest_range_validate,
    last_closed_hour,
)

from .derive import Fact, Scope, derive

log = logging.getLogger(__name__)


def clusters_select(name: str | None) -> list[Cluster]:
    """The named cluster, or every cluster (the default one from settings included)."""
    fleet.default_cluster_ensure()
    if name is None:
        return list(Cluster.objects.all())
    try:
        return [Cluster.objects.get(name=name)]
    except Cluster.DoesNotExist:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
        raise IngestError(f"Unknown cluster {name!r} (known: {known}).") from None


def hour_ingest(
    *, cluster: Cluster, hour: datetime, reader: PrometheusReader | None = None, force: bool = False
) -> HourReport:
    """Ingest one closed hour of one cluster. Running it again replaces the hour's rows with the same.

    Stored rows are not replaced by an answer that lost them (the hour is past the source's retention, or
    the source now gives far less of it): SourceLossError, nothing written, unless `force`."""
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
        data = hour_fetch(reader=reader, queries=queries, hour_start=hour.timestamp())
        retention = reader.retention()
    finally:
        if own_reader:
            reader.close()
    result = hour_compute(data)
    with transaction.atomic():
        telemetry.cluster_hour_lock(cluster=cluster, hour=hour)
        telemetry.cluster_write_lock(cluster=cluster)
        telemetry.cluster_retention_record(cluster=cluster, retention=retention)
        loss = source_loss(
            stored=telemetry.stored_hour_totals(cluster=cluster, hour=hour),
            fresh=telemetry.fresh_hour_totals(result),
            beyond=beyond_retention(hour=hour, now=timezone.now(), retention=retention),
            min_ratio=settings.FLEETWATT_INGEST_MIN_SOURCE_RATIO,
        )
        if loss and not force:
            raise SourceLossError(
                f"cluster {cluster.name}, hour {hour:%Y-%m-%d %H}:00 UTC: {loss}. Nothing was written; "
                "`manage.py ingest --force` replaces it anyway."
            )
        teams = TeamResolver(cluster=cluster, unassigned=fleet.unassigned_team_ensure())
        written = telemetry.hour_rows_write(cluster=cluster, hour=hour, result=result, teams=teams)
        if written.new_nodes:  # before the footprints: a node's server type sets its overhead and embodied carbon
            carbon.node_server_types_apply(cluster_id=cluster.pk, only_unset=True)
        derived = derive(
            Scope.hour(
                cluster_id=cluster.pk, hour=hour, job_ids=written.job_ids, ingested_through=written.ingested_through
            ),
            changed={Fact.JOB_ROWS},
        )
        report = HourReport(
            cluster=cluster.name,
            hour=hour,
            gpus=len(result.gpu_hours),
            jobs=len({r.job_key for r in result.job_hours}),
            query_count=reader.log.count - count0,
            prometheus_s=reader.log.seconds - seconds0,
            duration_s=time.perf_counter() - started,
            derive_s=derived.duration_s,
            derive_steps_s=derived.timings_s,
        )
        telemetry.ingested_hour_record(cluster=cluster, hour=hour, report=report)
    return report


ProgressFn = Callable[[HourReport], None]


def range_ingest(
    *,
    clusters: list[Cluster],
    start: datetime,
    end: datetime,
    progress: ProgressFn | None = None,
    force: bool = False,
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
                report = hour_ingest(cluster=cluster, hour=hour, reader=reader, force=force)
                reports.append(report)
                if progress:
                    progress(report)
        finally:
            reader.close()
    return reports


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
            except (PrometheusUnavailable, SourceLossError) as exc:
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
