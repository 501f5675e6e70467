"""The login throttle's parts (django-axes does the counting, in Postgres): which address a login comes
from, and the check that refuses a locked-out user name or address before any password is tried."""

from __future__ import annotations

import ipaddress
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR; behind FLEETWATT_TRUSTED_PROXIES reverse proxies, each appending the address it saw to
    X-Forwarded-For, the address the outermost of them saw. What a client wrote into the header itself
    stands before those hops and is never read (it could name anyone)."""
    remote = str(request.META.get("REMOTE_ADDR", ""))
    hops = settings.FLEETWATT_TRUSTED_PROXIES
    if hops <= 0:
        return remote
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    if len(forwarded) < hops:
        return remote  # not through the proxies, or they did not say
    try:
        return str(ipaddress.ip_address(forwarded[-hops]))
    except ValueError:
        return remote


class LoginThrottleBackend(AxesStandaloneBackend):
    """axes's lockout check, first of the authentication backends. Every login over HTTP (the login page,
    the admin's) authenticates with its request and is checked; a login without one (the test client's
    `login()`, a shell) comes from no client, so there is nothing to key a lock on, and it goes on to the
    password check (axes itself would raise)."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
