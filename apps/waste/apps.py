from django.apps import AppConfig


class WasteConfig(AppConfig):
    name = "apps.waste"
    default_auto_field = "django.db.models.BigAutoField"
