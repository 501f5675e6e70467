"""Named API tokens for finance tools: created and revoked in the app, stored hashed, shown once,
read-only, with their last use and, unless their creator chose none, an expiry (docs/operations.md, "Headers and
tokens")."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from django.db.models import Q
from django.utils import timezone

PREFIX = "fw_"


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        """Neither revoked nor expired."""
        return self.filter(revoked_at__isnull=True).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
        )


class ApiToken(models.Model):
    """A read-only key a tool sends as `Authorization: Bearer fw_...`. Only its hash is kept."""

    name = models.CharField(max_length=100, help_text="What uses it, e.g. 'finance ERP export'.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    lookup = models.CharField(max_length=12, unique=True, help_text="The key's first characters, to find it.")
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Tokens made before expiries existed have none, as a token made with "never" (their use is unchanged).
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never.")

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.lookup}…)"

    def expired(self, *, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    @classmethod
    def issue(cls, *, user: User, name: str, expires_at: datetime | None = None) -> tuple[ApiToken, str]:
        """A new token and its key (refused from `expires_at` on; None: never); the key is shown this once and never
        stored."""
        key = PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, lookup=key[: len(PREFIX) + 8], key_hash=token_hash(key), expires_at=expires_at
        )
        return token, key
