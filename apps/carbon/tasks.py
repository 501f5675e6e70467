"""Celery tasks: thin wrappers over the carbon app's services."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.utils import timezone

from apps.core.task_retries import retry_policy

from .when_services import hints_record


@shared_task(acks_late=True, **retry_policy())
def record_when_to_run_hints_task(now_iso: str | None = None) -> int:
    """Beat, hourly: keep every team's when-to-run hints as of this hour, to be checked against the intensity that
    comes (apps.carbon.when_services.hints_record). Running it again in the same hour stores the same hints."""
    now = datetime.fromisoformat(now_iso) if now_iso else timezone.now()
    return hints_record(now=now)
