"""Celery tasks: thin wrappers over the ingest (apps.pipeline.ingest) and its fan-out (apps.pipeline.fanout)."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.utils import timezone

from apps.core.kept import ingest_started
from apps.core.task_retries import retry_policy
from apps.fleet.models import Cluster
from apps.pipeline import fanout
from apps.pipeline.ingest import IngestError, SourceLossError, closed_hours_ingest, hour_ingest
from apps.rollups.documents import asked_prepare
from apps.telemetry.shards import ShardOverlapError

from .partitions import partitions_ahead_ensure
from .prometheus import PrometheusUnavailable


@shared_task(acks_late=True, **retry_policy())
def ingest_closed_hours_task() -> int:
    """Every cluster from its watermark to the last closed hour, in this one task (FLEETWATT_INGEST_FANOUT=0:
    one worker). An unreachable Prometheus is left for the next run (per cluster); the database being down is
    retried."""
    ingest_started()
    ingested = closed_hours_ingest()
    if ingested:
        asked_prepare()
    return len(ingested)


@shared_task(acks_late=True, **retry_policy(PrometheusUnavailable))
def ingest_hour_task(cluster_id: int, hour_iso: str) -> int:
    """One cluster-hour, for fanning a backfill out over workers. Idempotent (the hour's rows are replaced
    under its lock), so it is retried on an unreachable Prometheus or database, and run again when its
    worker process dies (CELERY_TASK_REJECT_ON_WORKER_LOST)."""
    cluster = Cluster.objects.get(pk=cluster_id)
    ingest_started()
    report = hour_ingest(cluster=cluster, hour=datetime.fromisoformat(hour_iso))
    asked_prepare()
    return report.jobs


@shared_task(acks_late=True, **retry_policy())
def ingest_dispatch_task(now_iso: str | None = None) -> int:
    """Beat, hourly: each cluster's closed hours as a batch of part tasks on its queue. Returns the parts queued."""
    dispatched = fanout.dispatch(now=datetime.fromisoformat(now_iso) if now_iso else None)
    for d in dispatched:
        _queue(d)  # each batch is committed by now: a worker finds it
    return sum(len(d.parts) for d in dispatched)


def _queue(d: fanout.Dispatched) -> None:
    queue = fanout.queue_for(Cluster.objects.get(name=d.cluster))
    for part in d.parts:
        ingest_part_task.apply_async((part.batch_id, part.hour.isoformat(), part.shard), queue=queue)
    if d.derive:
        ingest_batch_derive_task.apply_async((d.batch_id,), queue=queue)


@shared_task(acks_late=True, **retry_policy(PrometheusUnavailable))
def ingest_part_task(batch_id: int, hour_iso: str, shard: str) -> bool:
    """One shard-hour of a batch; the batch's last part queues its derivation. An unreachable Prometheus is
    retried; an answer that lost data, or shards that overlap, wait on the batch (its error says why) for an
    admin, and beat queues the part again later."""
    part = fanout.PartRef(batch_id, datetime.fromisoformat(hour_iso), shard)
    ingest_started()
    try:
        outcome = fanout.part_ingest(part)
    except PrometheusUnavailable as exc:
        fanout.part_failed(part, str(exc))
        raise
    except (SourceLossError, ShardOverlapError, IngestError) as exc:
        fanout.part_failed(part, str(exc))
        return False
    if outcome.batch_complete:
        queue = fanout.queue_for(Cluster.objects.get(ingest_batches__pk=batch_id))
        ingest_batch_derive_task.apply_async((batch_id,), queue=queue)
    return outcome.written


@shared_task(acks_late=True, **retry_policy())
def ingest_batch_derive_task(batch_id: int) -> int:
    """A batch's one derivation (all its hours at once), then the watermark; the cluster's next batch at once
    when it is still behind (a catch-up). Returns the jobs derived."""
    ingest_started()
    report = fanout.batch_derive(batch_id)
    # Committed: the rollups asked for lately, ready before they are asked again; by the last of the clusters'
    # derivations queued together (each moves the generation on: one prepare, not one per cluster).
    if report is not None and not fanout.derives_pending():
        asked_prepare()
    if fanout.behind(batch_id):
        ingest_dispatch_task.apply_async()
    return report.jobs if report else 0


@shared_task(acks_late=True, **retry_policy())
def hour_partitions_ahead_task() -> int:
    """Beat, daily: the per-hour tables' partitions of this month and the months ahead. Returns those made."""
    return partitions_ahead_ensure(now=timezone.now())
