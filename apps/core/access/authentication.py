"""Authentication and throttling of the named API tokens (apps.core.models.ApiToken)."""

from __future__ import annotations

import hmac
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from apps.core.models import PREFIX, ApiToken, token_hash

from .policy import user_is_read_only, user_sees_all_teams

LAST_USED_RESOLUTION = timedelta(minutes=1)  # do not write on every request


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace").split()
        if len(header) != 2 or header[0] != self.keyword or not header[1].startswith(PREFIX):
            return None
        key = header[1]
        tokens = ApiToken.objects.filter(revoked_at__isnull=True).select_related("user")
        token = tokens.filter(lookup=key[: len(PREFIX) + 8]).first()
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
        self.cache.add(counter, 0, timeout=2 * duration)
        try:
            count = self.cache.incr(counter)
        except ValueError:  # evicted between the two calls
            self.cache.set(counter, 1, timeout=2 * duration)
            count = 1
        self.window_end = (window + 1) * duration
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
