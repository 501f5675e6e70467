from typing import Any

from celery.signals import task_failure, task_retry, task_success
from django.apps import AppConfig
from django.conf import settings
from django.db import connections
from django.db.models.signals import post_migrate

from .access.database_roles import app_role_grant
from .metrics import CELERY_TASKS
from .services import metric_count


def _app_role_grant(sender: AppConfig, using: str, **kwargs: Any) -> None:
    """After a migrate (sent once per app: act on this app's), grant the app role its privileges."""
    if settings.FLEETWATT_DB_APP_ROLE:
        app_role_grant(connection=connections[using], role=settings.FLEETWATT_DB_APP_ROLE)


def _task_name(sender: Any) -> str:
    return str(getattr(sender, "name", None) or sender)


# Celery's signals, in whichever process runs the task (a worker's pool process, or `apply()` here). They
# import no model: connected from ready(), they are in place before any worker builds its task tracers.
def _task_succeeded(sender: Any = None, **kwargs: Any) -> None:
    metric_count(metric=CELERY_TASKS, labels=[_task_name(sender), "success"])


def _task_failed(sender: Any = None, **kwargs: Any) -> None:
    metric_count(metric=CELERY_TASKS, labels=[_task_name(sender), "failure"])


def _task_retried(sender: Any = None, **kwargs: Any) -> None:
    metric_count(metric=CELERY_TASKS, labels=[_task_name(sender), "retry"])


class CoreConfig(AppConfig):
    name = "apps.core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .db import lookups  # noqa: F401 (`__any`)
        from .page_cache import page_cache_signals_connect
        from .web import schema  # noqa: F401 (the token scheme for drf-spectacular)

        post_migrate.connect(_app_role_grant, sender=self, dispatch_uid="fleetwatt-app-role-grant")
        task_success.connect(_task_succeeded, dispatch_uid="fleetwatt-metrics-task-success")
        task_failure.connect(_task_failed, dispatch_uid="fleetwatt-metrics-task-failure")
        task_retry.connect(_task_retried, dispatch_uid="fleetwatt-metrics-task-retry")
        page_cache_signals_connect()
