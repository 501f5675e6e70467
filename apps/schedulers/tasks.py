"""Celery tasks: thin wrappers over the scheduler sync (apps.pipeline.scheduler)."""

from __future__ import annotations

from celery import shared_task

from apps.core.kept import ingest_started
from apps.core.task_retries import retry_policy
from apps.pipeline.scheduler import schedulers_catch_up
from apps.rollups.documents import asked_prepare


@shared_task(acks_late=True, **retry_policy())
def sync_schedulers_task() -> int:
    """Beat, hourly: every cluster with a scheduler, from its watermark (less the look-back) to now. An
    unreadable scheduler is recorded on its cluster and left for the next run; the database being down is
    retried. Safe to run twice: records are upserted by job key."""
    ingest_started()  # the scheduler's records are an ingest too: the rollups asked for are prepared after it
    synced = schedulers_catch_up()
    asked_prepare()
    return len(synced)
