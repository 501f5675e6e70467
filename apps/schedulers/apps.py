from django.apps import AppConfig


class SchedulersConfig(AppConfig):
    """Reads schedulers' accounting onto jobs; no models of its own (they live on jobs.Job and fleet.Cluster)."""

    name = "apps.schedulers"
    default_auto_field = "django.db.models.BigAutoField"
