"""The checks of the app's own dependencies that /healthz reports: Postgres and Redis. Each answers a small
dict, `ok` first; a failure is named by the error's class only, never its message (messages carry host
names, users, URLs)."""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, connection

Check = dict[str, Any]


def database_check() -> Check:
    """Postgres answers a query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return {"ok": False, "error": exc.__class__.__name__}
    return {"ok": True}


def redis_check(*, timeout_s: float) -> Check:
    """Every Redis the app uses (the cache's, the Celery broker's) answers a PING, each on a connection of
    its own (the cache fails open: it cannot say whether Redis is there)."""
    urls = {settings.CELERY_BROKER_URL, *(c.get("LOCATION", "") for c in settings.CACHES.values())}
    for url in sorted(u for u in urls if isinstance(u, str) and u.startswith(("redis://", "rediss://", "unix://"))):
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
        except (redis.RedisError, OSError) as exc:
            return {"ok": False, "error": exc.__class__.__name__}
        finally:
            client.close()
    return {"ok": True}
