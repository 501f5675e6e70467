"""The ingest fanned out over Celery workers: beat queues each cluster's closed hours as one batch of tasks,
one per hour and shard (apps.telemetry.shards); any worker on any host takes them; the batch's last part
queues its one derivation.

    dispatch (beat)      one open batch per cluster: its hours x shards as part tasks, on the cluster's queue
    part (any worker)    fetch one shard-hour; unsharded: write the hour; sharded: stage the answer, and the
                         part that completes the hour writes it from the merged answers. The hour waits,
                         written and not derived, with the jobs it changed.
    derive (any worker)  once every part is written: derive the batch's hours at once, move the watermark

The latch is in Postgres, not in the broker: each part's `written_at` and the batch's `derive_queued_at` are
set in the transaction that writes, so a killed worker (its task is delivered again: acks_late), a flushed
broker or a second beat loses nothing and counts nothing twice (every write replaces the hour's rows). Beat
finds a batch that stalled (a part that failed for good, a lost message): it derives what was written and
queues the missing parts again.

Locks, always in this order: the cluster-hour's (writes of one hour take turns), the cluster's write lock
(one writer of a cluster's rows), then the batch's row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from apps.core import locks
from apps.core.collector import collector_paused
from apps.fleet.models import Cluster
from apps.telemetry import selectors as telemetry_reads
from apps.telemetry import services as telemetry
from apps.telemetry.models import ClusterShard, IngestBatch, IngestedHour, IngestPart, IngestWatermark
from apps.telemetry.prometheus import reader_for
from apps.telemetry.services import HOUR, hours_between, last_closed_hour
from apps.telemetry.shards import Shard, cluster_shards, hour_inputs_merge, staged_bytes, staged_read

from .derive import DeriveReport, Fact, Scope, derive
from .ingest import Fetched, clusters_select, hour_fetch_shard, hour_write

log = logging.getLogger(__name__)


def shards_of(cluster: Cluster) -> list[Shard]:
    """The cluster's shards as they are configured now (the whole cluster when none is)."""
    return cluster_shards(list(ClusterShard.objects.filter(cluster=cluster).values_list("name", "node_pattern")))


def queue_for(cluster: Cluster) -> str:
    """The Celery queue of a cluster's ingest tasks: FLEETWATT_INGEST_CLUSTER_QUEUES pins a cluster to the
    workers that listen on a queue (near its Prometheus, say); the others share FLEETWATT_INGEST_QUEUE."""
    return str(settings.FLEETWATT_INGEST_CLUSTER_QUEUES.get(cluster.name, settings.FLEETWATT_INGEST_QUEUE))


@dataclass(frozen=True)
class PartRef:
    batch_id: int
    hour: datetime
    shard: str


@dataclass(frozen=True)
class Dispatched:
    cluster: str
    batch_id: int
    parts: list[PartRef]  # to queue
    derive: bool = False  # a stalled batch: queue its derivation too (of what it wrote so far)


def dispatch(*, now: datetime | None = None) -> list[Dispatched]:
    """What beat runs each hour: per cluster, a batch of the hours from its watermark to the last closed one
    (at most FLEETWATT_INGEST_BATCH_HOURS), unless one is open; an open batch that has stalled is derived as
    far as it was written and its missing parts are returned to queue again. The caller queues the parts
    (after this transaction commits: a worker must find the batch)."""
    target = last_closed_hour(now)
    out: list[Dispatched] = []
    for cluster in clusters_select(None):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.DISPATCH, cluster.pk])
            open_batch = IngestBatch.objects.filter(cluster=cluster, done_at__isnull=True).first()
            if open_batch is not None:
                stalled = _stalled(open_batch, now=timezone.now())  # the clock's time, whatever `now` says
                if stalled is not None:
                    out.append(stalled)
                continue
            mark = IngestWatermark.objects.filter(cluster=cluster).first()
            first = mark.ingested_through if mark else target
            hours = hours_between(first, target + HOUR)[: settings.FLEETWATT_INGEST_BATCH_HOURS]
            if not hours:
                continue
            shards = shards_of(cluster)
            batch = IngestBatch.objects.create(
                cluster=cluster,
                start=hours[0],
                end=hours[-1] + HOUR,
                aimed_through=target + HOUR,
                shards=[{"name": s.name, "node_match": s.node_match} for s in shards],
            )
            parts = [PartRef(batch.pk, hour, s.name) for hour in hours for s in shards]
            out.append(Dispatched(cluster.name, batch.pk, parts))
    return out


def _stalled(batch: IngestBatch, *, now: datetime) -> Dispatched | None:
    """An open batch with no part fetched for FLEETWATT_INGEST_STALL_S: derive what it wrote, return its missing
    parts. (A long batch whose parts keep coming in is not stalled, however long it takes.)"""
    fetched = IngestPart.objects.filter(batch=batch).aggregate(last=Max("fetched_at"))["last"]
    since = max(t for t in (batch.queued_at, batch.requeued_at, fetched) if t is not None)
    if now - since < timedelta(seconds=settings.FLEETWATT_INGEST_STALL_S):
        return None
    written = set(IngestPart.objects.filter(batch=batch, written_at__isnull=False).values_list("hour", "shard"))
    missing = [
        PartRef(batch.pk, hour, s["name"])
        for hour in hours_between(batch.start, batch.end)
        for s in batch.shards
        if (hour, s["name"]) not in written
    ]
    batch.requeued_at = now
    batch.save(update_fields=["requeued_at"])
    log.warning("cluster %s: batch %s stalled (%s); %d parts queued again", batch.cluster, batch.pk,
                batch.error or "no error", len(missing))  # fmt: skip
    # What was written is derived now (the watermark moves over it); the last missing part, once written,
    # fires the latch again, or, none missing (a derivation lost), this derivation closes the batch.
    return Dispatched(batch.cluster.name, batch.pk, missing, derive=True)


@dataclass(frozen=True)
class PartOutcome:
    written: bool  # the part's hour was written (by this part, or it completed a sharded hour)
    batch_complete: bool  # this part was the batch's last: its derivation is to be queued


def part_ingest(part: PartRef) -> PartOutcome:
    """Fetch one shard-hour and write what it completes. Idempotent: a second run of a part (a redelivery, a
    requeue) fetches again and replaces the same rows."""
    batch = IngestBatch.objects.select_related("cluster").get(pk=part.batch_id)
    if batch.done_at is not None:
        return PartOutcome(written=False, batch_complete=False)  # a late duplicate of a derived batch
    cluster = batch.cluster
    shards = {s["name"]: s["node_match"] for s in batch.shards}
    if part.shard not in shards:
        raise ValueError(f"Batch {batch.pk} of cluster {cluster.name} has no shard {part.shard!r}.")
    reader = reader_for(cluster)
    with collector_paused():  # the answers (and a sharded hour's staged ones): many objects, no cycles
        try:
            fetched = hour_fetch_shard(cluster=cluster, hour=part.hour, reader=reader, node_match=shards[part.shard])
        finally:
            reader.close()
        with transaction.atomic():
            written = _part_write(batch, part, fetched, sharded=len(shards) > 1)
            complete = _latch(batch) if written else False
    return PartOutcome(written=written, batch_complete=complete)


def _part_write(batch: IngestBatch, part: PartRef, fetched: Fetched, *, sharded: bool) -> bool:
    cluster = batch.cluster
    if not sharded:
        hour_write(cluster=cluster, hour=part.hour, fetched=fetched, derive_now=False)
        IngestPart.objects.update_or_create(
            batch=batch, hour=part.hour, shard=part.shard, defaults={"written_at": timezone.now(), "staged": None}
        )
        return True
    IngestPart.objects.update_or_create(
        batch=batch,
        hour=part.hour,
        shard=part.shard,
        defaults={"staged": staged_bytes(fetched.data, _meta(fetched)), "written_at": None},
    )
    # Take the hour's turn; then whoever finds every shard of the hour staged writes it (the others' staged
    # rows are committed by then: the lock is taken after this part's own row is written).
    telemetry.cluster_hour_lock(cluster=cluster, hour=part.hour)
    rows = IngestPart.objects.filter(batch=batch, hour=part.hour, staged__isnull=False).values_list("shard", "staged")
    blobs: dict[str, bytes] = {shard: bytes(blob) for shard, blob in rows if blob is not None}
    if set(blobs) != {s["name"] for s in batch.shards}:
        return False
    staged = {shard: staged_read(blob) for shard, blob in blobs.items()}
    merged = hour_inputs_merge({shard: data for shard, (data, _) in staged.items()})
    meta = [m for _, m in staged.values()]
    retention = meta[0]["retention_s"]
    whole = Fetched(
        data=merged,
        retention=timedelta(seconds=retention) if retention is not None else None,
        query_count=sum(m["query_count"] for m in meta),
        prometheus_s=sum(m["prometheus_s"] for m in meta),
    )
    hour_write(cluster=cluster, hour=part.hour, fetched=whole, derive_now=False)
    IngestPart.objects.filter(batch=batch, hour=part.hour).update(written_at=timezone.now())
    return True


def _meta(fetched: Fetched) -> dict[str, float | int | None]:
    retention = fetched.retention.total_seconds() if fetched.retention is not None else None
    return {"retention_s": retention, "query_count": fetched.query_count, "prometheus_s": fetched.prometheus_s}


def _latch(batch: IngestBatch) -> bool:
    """Whether every part of the batch is written and nobody has queued its derivation yet (then this caller
    does, after its transaction commits). Under the batch's row lock: exactly one caller sees True."""
    batch = IngestBatch.objects.select_for_update().get(pk=batch.pk)
    expected = len(hours_between(batch.start, batch.end)) * len(batch.shards)
    written = IngestPart.objects.filter(batch=batch, written_at__isnull=False).count()
    if written < expected or batch.derive_queued_at is not None or batch.done_at is not None:
        return False
    batch.derive_queued_at = timezone.now()
    batch.save(update_fields=["derive_queued_at"])
    return True


def part_failed(part: PartRef, error: str) -> None:
    """Keep a part's error on its batch (the status page shows it; beat queues the part again later)."""
    IngestBatch.objects.filter(pk=part.batch_id).update(error=f"{part.hour:%Y-%m-%d %H}:00 {part.shard}: {error}")


def batch_derive(batch_id: int) -> DeriveReport | None:
    """Derive the batch's written hours at once and move the watermark; close the batch when every part is
    written. Idempotent: a batch already closed derives nothing."""
    batch = IngestBatch.objects.select_related("cluster").get(pk=batch_id)
    with collector_paused(), transaction.atomic():  # a big cluster's jobs and rows: many objects, no cycles
        telemetry.cluster_write_lock(cluster=batch.cluster)  # before the batch's row: the parts' order
        batch = IngestBatch.objects.select_for_update().select_related("cluster").get(pk=batch_id)
        if batch.done_at is not None:
            return None
        report = hours_derive(cluster=batch.cluster, start=batch.start, end=batch.end)
        expected = len(hours_between(batch.start, batch.end)) * len(batch.shards)
        if IngestPart.objects.filter(batch=batch, written_at__isnull=False).count() == expected:
            batch.done_at = timezone.now()
            batch.error = ""
            batch.save(update_fields=["done_at", "error"])
            IngestPart.objects.filter(batch=batch).update(staged=None)  # the answers are in the rows now
    return report


def derives_pending() -> bool:
    """Whether a batch of any cluster is written and its derivation queued, not yet done: that derivation will
    move the data's generation on again, so the rollups are best prepared after it (apps.rollups.documents)."""
    return IngestBatch.objects.filter(derive_queued_at__isnull=False, done_at__isnull=True).exists()


def behind(batch_id: int) -> bool:
    """Whether the batch, derived, left its cluster short of where beat aimed (a catch-up after an outage longer
    than a batch): the next batch is then queued at once rather than at beat's next run."""
    batch = IngestBatch.objects.filter(pk=batch_id, done_at__isnull=False).first()
    if batch is None or batch.aimed_through is None:
        return False
    marks = IngestWatermark.objects.filter(cluster_id=batch.cluster_id).values_list("ingested_through", flat=True)
    mark = marks.first()
    return mark is not None and mark < batch.aimed_through


def hours_derive(*, cluster: Cluster, start: datetime, end: datetime) -> DeriveReport | None:
    """Derive, in one run, every hour of the cluster in [start, end) written and not yet derived; then move
    the watermark. Within the caller's transaction (it holds the cluster's write lock)."""
    pending = IngestedHour.objects.select_for_update().filter(
        cluster=cluster, hour__gte=start, hour__lt=end, derived=False
    )
    rows = list(pending.values_list("hour", "pending_job_ids"))
    if not rows:
        return None
    hours = sorted(h for h, _ in rows)
    job_ids = {job_id for _, ids in rows for job_id in ids}
    report = derive(
        Scope(
            cluster_ids=frozenset([cluster.pk]),
            start=hours[0],
            end=hours[-1] + HOUR,
            job_ids=frozenset(job_ids),
            ingested_through=telemetry_reads.ingested_through(cluster, hours[-1]),
        ),
        changed={Fact.JOB_ROWS},
    )
    pending.update(derived=True, pending_job_ids=[])
    telemetry.watermark_advance(cluster)
    return report
