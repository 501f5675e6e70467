"""Celery tasks: thin wrappers over the ingest (apps.pipeline.ingest)."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task

from apps.fleet.models import Cluster
from apps.pipeline.ingest import closed_hours_ingest, hour_ingest

from .prometheus import PrometheusUnavailable


@shared_task(acks_late=True)
def ingest_closed_hours_task() -> int:
    """Beat, hourly: every cluster from its watermark to the last closed hour."""
    return len(closed_hours_ingest())


@shared_task(
    acks_late=True,
    autoretry_for=(PrometheusUnavailable,),
    retry_backoff=30,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=10,
)
def ingest_hour_task(cluster_id: int, hour_iso: str) -> int:
    """One cluster-hour, for fanning a backfill out over workers."""
    cluster = Cluster.objects.get(pk=cluster_id)
    return hour_ingest(cluster=cluster, hour=datetime.fromisoformat(hour_iso)).jobs
