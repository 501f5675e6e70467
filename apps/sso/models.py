"""Single sign-on: who a provider's subject is here, the group rules of the config file, and which of a
user's memberships and roles single sign-on granted (and so may take back)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.fleet.models import Team

from .mapping import DEFAULT_GROUPS_CLAIM, ROLES


class SsoIdentity(models.Model):
    """A provider's subject (`iss`, `sub`) as a fleetwatt user. Logins find the user by it, never by a user
    name or an email address a provider could also give someone else."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    last_login_groups = models.JSONField(default=list, blank=True, help_text="The groups of the last login.")

    class Meta:
        ordering = ["issuer", "subject"]
        verbose_name_plural = "SSO identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="ssoidentity_unique")]

    def __str__(self) -> str:
        return f"{self.user} = {self.subject} at {self.issuer}"


class SsoSettings(models.Model):
    """The config file's `sso` section, besides its rules: one row (id 1), absent until a file gives it."""

    groups_claim = models.CharField(max_length=255, default=DEFAULT_GROUPS_CLAIM)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "SSO settings"

    def __str__(self) -> str:
        return f"groups from claim {self.groups_claim!r}"


class SsoGroupRule(models.Model):
    """One rule of the config file's `sso.map`: a provider group gives a role, of a team or fleet-wide."""

    group = models.CharField(max_length=255)
    role = models.CharField(max_length=10, choices=[(r, r) for r in ROLES])
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="sso_rules")
    position = models.PositiveIntegerField(default=0, help_text="Its place in the file's list.")

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["group", "team", "role"], name="ssogrouprule_unique", nulls_distinct=False)
        ]

    def __str__(self) -> str:
        return f"{self.group} -> {self.role}" + (f" of {self.team.name}" if self.team else "")


class SsoGrant(models.Model):
    """What single sign-on gave a user: a team membership (with its role), or a fleet role. Only these are
    taken back when the groups no longer give them; what an admin granted by hand has no grant and stays."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_grants")
    role = models.CharField(max_length=10, choices=[(r, r) for r in ROLES])
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="sso_grants")

    class Meta:
        ordering = ["user_id", "role", "team_id"]
        constraints = [
            # one grant per team (its role can change), and one per fleet role
            models.UniqueConstraint(
                fields=["user", "team"], condition=models.Q(team__isnull=False), name="ssogrant_team_unique"
            ),
            models.UniqueConstraint(
                fields=["user", "role"], condition=models.Q(team__isnull=True), name="ssogrant_role_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.role}" + (f" of {self.team.name}" if self.team else "")
