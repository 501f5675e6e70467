from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "apps.dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.rollups import documents

        from .page_cache import asked_pages_prepare

        # The pages asked for lately are made again after an ingest, with the rollups' documents they read.
        if asked_pages_prepare not in documents.PREPARED_AFTER:
            documents.PREPARED_AFTER.append(asked_pages_prepare)
