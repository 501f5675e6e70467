from django.apps import AppConfig


class ConfigConfig(AppConfig):
    """The fleet config file (docs/config.md): its parser, and the writes that apply it (no models of its own)."""

    name = "apps.config"
