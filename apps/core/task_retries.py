"""How fleetwatt's Celery tasks retry: on named transient errors only (the task's own, and the database
being unavailable), with exponential backoff and jitter (FLEETWATT_TASK_RETRY_*). Every task is safe to
run twice, so a retry, or a redelivery after its worker died, changes nothing that a first run did not."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError

# Postgres down, restarting, refusing connections, or the connection lost mid-task.
DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


def retry_policy(*transient: type[Exception]) -> dict[str, Any]:
    """Options for `@shared_task`: retry on these errors and on the database being unavailable."""
    return {
        "autoretry_for": (*transient, *DATABASE_UNAVAILABLE),
        "retry_backoff": settings.FLEETWATT_TASK_RETRY_BACKOFF_S,
        "retry_backoff_max": settings.FLEETWATT_TASK_RETRY_BACKOFF_MAX_S,
        "retry_jitter": True,
        "max_retries": settings.FLEETWATT_TASK_MAX_RETRIES,
    }
