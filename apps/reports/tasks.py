"""Celery tasks: thin wrappers over the report services."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.utils import timezone

from apps.core.task_retries import retry_policy

from .services import weekly_reports_send


@shared_task(acks_late=True, **retry_policy())
def send_weekly_reports_task(now_iso: str | None = None) -> list[str]:
    """Beat, hourly: each team's report for the week that ended, once its local send time (default
    Monday 07:00 in its site's time zone) has passed; then the admins' fleet summary. Running it again,
    or a redelivery after a worker died, sends nothing twice (apps.reports.services)."""
    now = datetime.fromisoformat(now_iso) if now_iso else timezone.now()
    return [f"{line.label} {line.week_start}: {line.outcome}" for line in weekly_reports_send(now=now)]
