from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.db import connections
from django.db.models.signals import post_migrate

from .roles import app_role_grant


def _app_role_grant(sender: AppConfig, using: str, **kwargs: Any) -> None:
    """After a migrate (sent once per app: act on this app's), grant the app role its privileges."""
    if settings.FLEETWATT_DB_APP_ROLE:
        app_role_grant(connection=connections[using], role=settings.FLEETWATT_DB_APP_ROLE)


class CoreConfig(AppConfig):
    name = "apps.core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import schema  # noqa: F401 (registers the token scheme with drf-spectacular)

        post_migrate.connect(_app_role_grant, sender=self, dispatch_uid="fleetwatt-app-role-grant")
