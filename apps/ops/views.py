"""/healthz: the app's dependencies (Postgres, Redis) and each cluster's (its Prometheus, its ingest's lag)."""

from __future__ import annotations

import json
import threading
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from apps.ops.health import database_check, redis_check
from apps.telemetry.health import cluster_checks

_kept_lock = threading.Lock()
_kept: tuple[float, int, bytes] | None = None  # (when, status, body): the last answer, for a few seconds


def healthz(request: HttpRequest) -> HttpResponse:
    """Each dependency as JSON (`postgres`, `redis`, `prometheus:<cluster>`, `ingest:<cluster>`), 200 when
    all are ok, else 503. Unauthenticated, so: no URL, no error message, and the answer is kept
    FLEETWATT_HEALTHZ_CACHE_S seconds per process, so that asking it often asks nobody else more."""
    global _kept
    with _kept_lock:
        if _kept is not None and time.monotonic() - _kept[0] < settings.FLEETWATT_HEALTHZ_CACHE_S:
            return _health_response(_kept[1], _kept[2])
    timeout_s = settings.FLEETWATT_HEALTHZ_TIMEOUT_S
    checks = {"postgres": database_check(), "redis": redis_check(timeout_s=timeout_s)}
    if checks["postgres"]["ok"]:
        checks |= cluster_checks(now=timezone.now(), max_lag_h=settings.FLEETWATT_INGEST_MAX_LAG_H, timeout_s=timeout_s)
    ok = all(check["ok"] for check in checks.values())
    status, body = (200 if ok else 503), json.dumps({"status": "ok" if ok else "failing", "checks": checks}).encode()
    with _kept_lock:
        _kept = (time.monotonic(), status, body)
    return _health_response(status, body)


def _health_response(status: int, body: bytes) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response
