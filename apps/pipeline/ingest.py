"""The ingest, end to end: fetch a closed cluster-hour from Prometheus, compute its rows, and in one
transaction under the cluster-hour's lock replace the stored rows, derive everything that follows
(apps.pipeline.derive) and move the watermark. Beat's catch-up and the `ingest` command run it hour by
hour; re-running an hour gives the same rows."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.carbon import services as carbon
from apps.core import locks
from apps.core.collector import collector_paused
from apps.fleet import services as fleet
from apps.fleet.models import Cluster
from apps.fleet.selectors import TeamResolver
from apps.telemetry import promql
from apps.telemetry import selectors as telemetry_reads
from apps.telemetry import services as telemetry
from apps.telemetry.fetch import hour_fetch
from apps.telemetry.guard import beyond_retention, fresh_hour_totals, source_loss
from apps.telemetry.hour import (
    HostLabelMissingError,
    HourInput,
    HourResult,
    SeriesLabelError,
    UnknownMethodError,
    UnknownSeriesError,
    hour_compute,
)
from apps.telemetry.models import IngestWatermark
from apps.telemetry.partitions import expiry_horizon, hour_partition_ensure
from apps.telemetry.prometheus import PrometheusReader, PrometheusUnavailable, reader_for
from apps.telemetry.services import HOUR, HourReport, hour_floor, hours_between, last_closed_hour
from apps.telemetry.work import UnjoinedWork, WorkRow, work_of_unknown_job, work_rows

from .derive import Fact, Scope, derive

log = logging.getLogger(__name__)


class IngestError(Exception):
    """Bad input to the ingest (range, cluster); nothing was written."""


class SourceLossError(IngestError):
    """The source no longer holds what is stored for an hour; nothing was written."""


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
    reader = reader or reader_for(cluster)
    with collector_paused():  # the hour's answers: many objects, no cycles, alive until written (apps.core.collector)
        try:
            fetched = hour_fetch_shard(cluster=cluster, hour=hour, reader=reader, node_match="")
        finally:
            if own_reader:
                reader.close()
        return hour_write(cluster=cluster, hour=hour, fetched=fetched, force=force, started=started)


@dataclass(frozen=True)
class Fetched:
    """One cluster-hour's (or shard-hour's) answers, parsed, with what fetching them took."""

    data: HourInput
    retention: timedelta | None
    query_count: int
    prometheus_s: float


def hour_fetch_shard(*, cluster: Cluster, hour: datetime, reader: PrometheusReader, node_match: str) -> Fetched:
    """The hour's queries for the cluster, or for one shard of it (`node_match`, apps.telemetry.shards)."""
    count0, seconds0 = reader.log.count, reader.log.seconds
    try:
        work = cluster.work_counters_read()
    except ValueError as exc:  # stored past the admin's checks (by hand): never read as "no work"
        raise IngestError(
            f"cluster {cluster.name}: its work_counters cannot be read ({exc}); fix them in the admin or the fleet "
            "config (docs/config.md). Nothing was written."
        ) from None
    queries = promql.HourQueries(
        cluster_selector=cluster.selector,
        scrape_interval_s=cluster.scrape_interval_s,
        lookback_s=settings.FLEETWATT_COUNTER_LOOKBACK_S,
        windows_open_left=reader.windows_open_left(),
        node_match=node_match,
        dcgm_host_label=cluster.dcgm_host_label,
        pod_claims=Cluster.Scheduler.KUBERNETES in cluster.scheduler_sources(),
        work=work,
    )
    data = hour_fetch(reader=reader, queries=queries, hour_start=hour.timestamp())
    if node_match and not cluster.dcgm_host_label:
        _shard_host_label_check(cluster=cluster, hour=hour, data=data)
    retention = reader.retention()
    return Fetched(data, retention, reader.log.count - count0, reader.log.seconds - seconds0)


def _shard_host_label_check(*, cluster: Cluster, hour: datetime, data: HourInput) -> None:
    """A shard matches dcgm-exporter's nodes by `Hostname` unless the cluster names its host label: series that
    name their node `hostname` only (dcgm-exporter 4.8.3+) would all fall into the `rest` shard, unseen."""
    lowercase = {
        lb.get("hostname", "")
        for lb in [sw.labels for sw in data.dcgm_energy] + [lb for _, lb, _ in data.dcgm_series]
        if lb.get("hostname") and not lb.get("Hostname")
    }
    if lowercase:
        raise IngestError(
            f"cluster {cluster.name}, hour {hour:%Y-%m-%d %H}:00 UTC: dcgm-exporter names its nodes in `hostname` "
            f"({', '.join(sorted(lowercase)[:3])}), and this sharded cluster's node matchers use `Hostname`: set "
            "the cluster's dcgm_host_label to hostname (docs/config.md). Nothing was written."
        )


def hour_write(
    *, cluster: Cluster, hour: datetime, fetched: Fetched, force: bool = False, derive_now: bool = True,
    started: float | None = None,
) -> HourReport:  # fmt: skip
    """Compute the hour's rows from its answers and, in one transaction under the cluster-hour's lock, replace
    the stored ones. `derive_now`: derive what follows and move the watermark in the same transaction (the
    hour alone); otherwise the hour waits, not derived, for its batch's one derivation (apps.pipeline.fanout).
    Inside a caller's transaction, it joins it."""
    started = time.perf_counter() if started is None else started
    _retention_check(cluster=cluster, hour=hour)
    result = _hour_rows_compute(cluster=cluster, hour=hour, fetched=fetched)
    work, unjoined = work_rows(fetched.data.work, hour_start=hour.timestamp())
    hour_partition_ensure(hour)
    with transaction.atomic():
        telemetry.cluster_hour_lock(cluster=cluster, hour=hour)
        telemetry.cluster_write_lock(cluster=cluster)
        telemetry.cluster_retention_record(cluster=cluster, retention=fetched.retention)
        _source_loss_check(cluster=cluster, hour=hour, result=result, work=work, fetched=fetched, force=force)
        teams = TeamResolver(cluster=cluster, unassigned=fleet.unassigned_team_ensure())
        written = telemetry.hour_rows_write(cluster=cluster, hour=hour, result=result, teams=teams, work=work)
        unjoined += [work_of_unknown_job(row) for row in written.work_without_job]
        _unjoined_work_log(cluster=cluster, hour=hour, unjoined=unjoined)
        if written.new_nodes:  # before the footprints: a node's server type sets its overhead and embodied carbon
            carbon.node_server_types_apply(cluster_id=cluster.pk, only_unset=True)
        if written.team_moved_job_ids:  # their earlier hours follow them (team, user), as after a reassignment
            derive(Scope.jobs(written.team_moved_job_ids), changed={Fact.BILLING})
        # Jobs an earlier, not yet derived write of this hour changed are derived with this one's.
        job_ids = set(written.job_ids) | telemetry_reads.pending_job_ids(cluster=cluster, hour=hour)
        derive_s, derive_steps_s = 0.0, dict[str, float]()
        if derive_now:
            derived = derive(
                Scope.hour(
                    cluster_id=cluster.pk, hour=hour, job_ids=job_ids, ingested_through=written.ingested_through
                ),
                changed={Fact.JOB_ROWS},
            )
            derive_s, derive_steps_s = derived.duration_s, derived.timings_s
        report = HourReport(
            cluster=cluster.name,
            hour=hour,
            gpus=len(result.gpu_hours),
            jobs=len({r.job_key for r in result.job_hours}),
            query_count=fetched.query_count,
            prometheus_s=fetched.prometheus_s,
            duration_s=time.perf_counter() - started,
            derive_s=derive_s,
            derive_steps_s=derive_steps_s,
            rows=written.rows,
            meterless=result.meterless,
            unclaimed=result.unclaimed,
            work_without_job=unjoined,
        )
        telemetry.ingested_hour_record(
            cluster=cluster, hour=hour, report=report, pending_job_ids=None if derive_now else job_ids
        )
    return report


def _retention_check(*, cluster: Cluster, hour: datetime) -> None:
    """Refuse an hour whose month is past the hour rows' retention: its partition is dropped, and its jobs'
    totals are kept as they were."""
    horizon = expiry_horizon(now=timezone.now(), keep_months=settings.FLEETWATT_HOUR_ROWS_KEEP_MONTHS)
    if horizon is not None and hour < datetime(horizon.year, horizon.month, 1, tzinfo=UTC):
        raise IngestError(
            f"cluster {cluster.name}, hour {hour:%Y-%m-%d %H}:00 UTC is past the hour rows' retention "
            f"(FLEETWATT_HOUR_ROWS_KEEP_MONTHS={settings.FLEETWATT_HOUR_ROWS_KEEP_MONTHS}: kept from {horizon}); "
            "its jobs' totals are kept as they were. Nothing was written."
        )


def _hour_rows_compute(*, cluster: Cluster, hour: datetime, fetched: Fetched) -> HourResult:
    """The hour's rows from its answers (apps.telemetry.hour); answers it cannot read are an IngestError naming
    the cluster and the hour, and what it had to repair is logged."""
    try:
        result = hour_compute(fetched.data, dcgm_host_label=cluster.dcgm_host_label)
    except (HostLabelMissingError, UnknownSeriesError, UnknownMethodError, SeriesLabelError) as exc:
        raise IngestError(f"cluster {cluster.name}, hour {hour:%Y-%m-%d %H}:00 UTC: {exc}") from None
    for note in result.repaired:  # the agents' words made storable (a name of 10,000 characters, a NUL)
        log.warning("cluster %s, hour %s:00 UTC: %s", cluster.name, f"{hour:%Y-%m-%d %H}", note)
    return result


def _source_loss_check(
    *, cluster: Cluster, hour: datetime, result: HourResult, work: list[WorkRow], fetched: Fetched, force: bool
) -> None:
    """Refuse to replace the stored hour by an answer that lost some of it (the source's retention, or far less
    of it), unless `force` (apps.telemetry.guard)."""
    loss = source_loss(
        stored=telemetry_reads.stored_hour_totals(cluster=cluster, hour=hour),
        fresh=fresh_hour_totals(result, work),
        beyond=beyond_retention(hour=hour, now=timezone.now(), retention=fetched.retention),
        min_ratio=settings.FLEETWATT_INGEST_MIN_SOURCE_RATIO,
    )
    if loss and not force:
        raise SourceLossError(
            f"cluster {cluster.name}, hour {hour:%Y-%m-%d %H}:00 UTC: {loss}. Nothing was written; "
            "`manage.py ingest --force` replaces it anyway."
        )


def _unjoined_work_log(*, cluster: Cluster, hour: datetime, unjoined: list[UnjoinedWork]) -> None:
    """Work counted by series tied to no job of the cluster is not stored: say so (the hour's record keeps it)."""
    if unjoined:
        log.warning(
            "cluster %s, hour %s:00 UTC: work counted by %d series tied to no job of the cluster (not stored; "
            "IngestedHour.stats.work_without_job)",
            cluster.name,
            f"{hour:%Y-%m-%d %H}",
            len(unjoined),
        )


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
        reader = reader_for(cluster)
        try:
            for hour in hours_between(start, end):
                report = hour_ingest(cluster=cluster, hour=hour, reader=reader, force=force)
                reports.append(report)
                if progress:
                    progress(report)
        finally:
            reader.close()
    return reports


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
            try:
                reader = reader_for(cluster)
            except PrometheusUnavailable as exc:  # its settings cannot be used (a variable unset): the others go on
                log.warning("%s; nothing ingested", exc)
                continue
            try:
                for hour in hours:
                    reports.append(hour_ingest(cluster=cluster, hour=hour, reader=reader))
            except (PrometheusUnavailable, SourceLossError, IngestError) as exc:
                # Each names the cluster (the reader's errors, SourceLossError's and IngestError's "cluster a, hour").
                log.warning("%s; will catch up from %s next run", exc, hour.isoformat())
            finally:
                reader.close()
        finally:
            _cluster_unlock(cluster)
    return reports


def _try_cluster_lock(cluster: Cluster) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [locks.CATCHUP, cluster.pk])
        return bool(cursor.fetchone()[0])


def _cluster_unlock(cluster: Cluster) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.CATCHUP, cluster.pk])
