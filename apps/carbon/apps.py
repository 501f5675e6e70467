from django.apps import AppConfig


class CarbonConfig(AppConfig):
    name = "apps.carbon"
    default_auto_field = "django.db.models.BigAutoField"
