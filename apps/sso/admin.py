from django.contrib import admin

from .models import SsoGrant, SsoGroupRule, SsoIdentity


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Link an existing account to a provider subject (its first SSO login would otherwise be refused)."""

    list_display = ["user", "issuer", "subject"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["last_login_groups"]
    raw_id_fields = ["user"]


@admin.register(SsoGroupRule)
class SsoGroupRuleAdmin(admin.ModelAdmin):
    """Read-only: the rules come from the config file's `sso` section (apply_config)."""

    list_display = ["group", "role", "team", "position"]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(SsoGrant)
class SsoGrantAdmin(admin.ModelAdmin):
    """What single sign-on gave each user; recomputed at their next login."""

    list_display = ["user", "role", "team"]
    list_filter = ["role"]
    search_fields = ["user__username"]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
