"""Authentication and throttling of the named API tokens (apps.core.models.ApiToken)."""

from __future__ import annotations

import functools
import hmac
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from apps.core.models import PREFIX, ApiToken, token_hash

from .policy import (
    user_from_row,
    user_is_read_only,
    user_sees_all_teams,
    user_with_viewer_columns,
    user_with_viewer_params,
)

LAST_USED_RESOLUTION = timedelta(minutes=1)  # do not write on every request


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace").split()
        if len(header) != 2 or header[0] != self.keyword or not header[1].startswith(PREFIX):
            return None
        key = header[1]
        token = _token_with_user(key[: len(PREFIX) + 8])
        if token is None or not hmac.compare_digest(token.key_hash, token_hash(key)):
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        now = timezone.now()
        if token.expired(now=now):
            raise exceptions.AuthenticationFailed(
                f"This API token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC: its owner makes a new one on the "
                "Tokens page."
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token's user is inactive.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


@functools.cache
def _token_sql() -> str:
    token_columns = ", ".join(f"t.{connection.ops.quote_name(str(f.column))}" for f in ApiToken._meta.concrete_fields)
    return (
        f"SELECT {token_columns}, {user_with_viewer_columns()} FROM {ApiToken._meta.db_table} t"
        f" JOIN {ApiToken.user.field.related_model._meta.db_table} u ON u.id = t.user_id"
        " WHERE t.lookup = %s AND t.revoked_at IS NULL"
    )


def _token_with_user(lookup: str) -> ApiToken | None:
    """The unrevoked token of `lookup` with its user and what the user may see, in one written-out query (on every
    request of a tool: the ORM's query with its join took longer to build than to run, and what the user may see
    was a second round trip)."""
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [*user_with_viewer_params(), lookup])
        row = cursor.fetchone()
    if row is None:
        return None
    fields = [f.attname for f in ApiToken._meta.concrete_fields]
    token = ApiToken.from_db(connection.alias, fields, row[: len(fields)])
    token.user = user_from_row(row[len(fields) :])
    return token


class ReadOnlyForApiTokens(permissions.BasePermission):
    """Named API tokens only read."""

    message = "API tokens are read-only."

    def has_permission(self, request: Request, view: object) -> bool:
        return not isinstance(request.auth, ApiToken) or request.method in permissions.SAFE_METHODS


class ApiTokenRateThrottle(SimpleRateThrottle):
    """Per token (`FLEETWATT_API_TOKEN_RATE`), so one tool cannot starve the others: a count per token and window
    of the rate's length, one atomic increment in the cache per request (Redis INCR). DRF's own throttle keeps
    every request's time in one list that each request reads and writes back whole: its cost grows with the rate,
    and two processes writing at once lose each other's requests. A fixed window lets at most twice the rate
    through across a window's edge; a refused request says when its window ends (Retry-After)."""

    scope = "api_token"

    def get_cache_key(self, request: Request, view: object) -> str | None:
        if not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}

    def allow_request(self, request: Request, view: object) -> bool:
        limit, duration = self.parse_rate(self.rate)
        key = self.get_cache_key(request, view)
        if limit is None or duration is None or key is None:
            return True
        self.now = self.timer()
        window = int(self.now // duration)
        counter = f"{key}_{window}"
        self.window_end = (window + 1) * duration
        count_window = getattr(self.cache, "window_count", None)  # (the fail-open Redis cache: one round trip)
        if count_window is not None:
            count = count_window(counter, timeout=2 * duration)
            return count is None or count <= limit  # (None: Redis unreachable, the request let through)
        self.cache.add(counter, 0, timeout=2 * duration)
        try:
            count = self.cache.incr(counter)
        except ValueError:  # evicted between the two calls
            self.cache.set(counter, 1, timeout=2 * duration)
            count = 1
        return bool(count <= limit)

    def wait(self) -> float | None:
        return max(self.window_end - self.now, 0.0)


class IsAdminOrFinance(permissions.BasePermission):
    """Fleet-wide data (every team's, the GPUs', the audit log): admins and finance only."""

    def has_permission(self, request: Request, view: object) -> bool:
        return user_sees_all_teams(request.user)


class ReadOnlyForFinance(permissions.BasePermission):
    """Finance reads everything and writes nothing, whatever its credentials (apps.core.access.policy)."""

    message = "Finance is read-only."

    def has_permission(self, request: Request, view: object) -> bool:
        return request.method in permissions.SAFE_METHODS or not user_is_read_only(request.user)


# Fleet-wide endpoints (every team's data, the clusters', the GPUs', the audit log). Every other endpoint has
# the default of settings.REST_FRAMEWORK: logged in, API tokens and finance read-only.
FLEET_WIDE = [permissions.IsAuthenticated, IsAdminOrFinance, ReadOnlyForApiTokens, ReadOnlyForFinance]
