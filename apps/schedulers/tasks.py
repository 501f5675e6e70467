"""Celery tasks: thin wrappers over the scheduler sync (apps.pipeline.scheduler)."""

from __future__ import annotations

from celery import shared_task

from apps.core.task_retries import retry_policy
from apps.pipeline.scheduler import schedulers_catch_up


@shared_task(acks_late=True, **retry_policy())
def sync_schedulers_task() -> int:
    """Beat, hourly: every cluster with a scheduler, from its watermark (less the look-back) to now. An
    unreadable scheduler is recorded on its cluster and left for the next run; the database being down is
    retried. Safe to run twice: records are upserted by job key."""
    return len(schedulers_catch_up())
