"""Celery tasks: thin wrappers over the ingest (apps.pipeline.ingest)."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task

from apps.core.task_retries import retry_policy
from apps.fleet.models import Cluster
from apps.pipeline.ingest import closed_hours_ingest, hour_ingest

from .prometheus import PrometheusUnavailable


@shared_task(acks_late=True, **retry_policy())
def ingest_closed_hours_task() -> int:
    """Beat, hourly: every cluster from its watermark to the last closed hour. An unreachable Prometheus
    is left for the next run (per cluster); the database being down is retried."""
    return len(closed_hours_ingest())


@shared_task(acks_late=True, **retry_policy(PrometheusUnavailable))
def ingest_hour_task(cluster_id: int, hour_iso: str) -> int:
    """One cluster-hour, for fanning a backfill out over workers. Idempotent (the hour's rows are replaced
    under its lock), so it is retried on an unreachable Prometheus or database, and run again when its
    worker process dies (CELERY_TASK_REJECT_ON_WORKER_LOST)."""
    cluster = Cluster.objects.get(pk=cluster_id)
    return hour_ingest(cluster=cluster, hour=datetime.fromisoformat(hour_iso)).jobs
