from django.apps import AppConfig


class PipelineConfig(AppConfig):
    """The order in which every figure is derived from an ingested hour (no models of its own)."""

    name = "apps.pipeline"
