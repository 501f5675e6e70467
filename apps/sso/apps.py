from django.apps import AppConfig


class SsoConfig(AppConfig):
    """Single sign-on with OpenID Connect: who the provider says a user is, and the teams and roles their
    groups give them (docs/sso.md)."""

    name = "apps.sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"
