from django.apps import AppConfig


class RollupsConfig(AppConfig):
    name = "apps.rollups"
    default_auto_field = "django.db.models.BigAutoField"
