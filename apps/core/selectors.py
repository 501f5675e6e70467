"""Reads of fleetwatt's own counters (apps.core.metrics), kept in Redis.

Why Redis and not counters in the process: gunicorn serves /metrics from one of several workers, and the
events happen in others and in Celery's processes (another container, another machine): each process's
own counters would show only its share, and a different one on each scrape. prometheus_client's
multiprocess mode shares files between processes of one machine only. A hash per counter in the app's
Redis (HINCRBY) is shared by every process that can reach it and costs one round trip per event."""

from __future__ import annotations

import logging
import threading
import time

import redis
from django.conf import settings

from .metrics import COUNTERS, counter_labels

log = logging.getLogger(__name__)

# Errors that mean "Redis is not there now" (as apps.core.fail_open_cache reads them).
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ReadOnlyError, OSError)
KEY_PREFIX = "fleetwatt:metrics:"

_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def metrics_redis() -> redis.Redis:
    """This process's client of settings.REDIS_URL (its pool is made anew in a forked child), with the
    app's Redis timeouts: an event never waits longer than a cache read would."""
    url = settings.REDIS_URL
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            timeout_s = settings.CACHES["default"].get("OPTIONS", {}).get("socket_timeout", 1.0)
            client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
            _clients[url] = client
        return client


def counter_key(metric: str) -> str:
    return KEY_PREFIX + metric


def metric_counts_read() -> dict[str, dict[tuple[str, ...], float]] | None:
    """Every counter's series and values; None when Redis cannot be read (the scrape says so rather than
    serve zeros, which would read as a counter reset)."""
    started = time.monotonic()
    try:
        with metrics_redis().pipeline(transaction=False) as pipe:
            for metric in COUNTERS:
                pipe.hgetall(counter_key(metric))
            answers = pipe.execute()
    except UNREACHABLE as exc:
        log.warning("metrics: Redis unreachable after %.1f s (%s); counters left out", time.monotonic() - started, exc)
        return None
    counts: dict[str, dict[tuple[str, ...], float]] = {}
    for metric, raw in zip(COUNTERS, answers, strict=True):
        series: dict[tuple[str, ...], float] = {}
        for raw_field, raw_value in raw.items():
            labels = counter_labels(metric, raw_field.decode())
            if labels is not None:
                series[labels] = float(raw_value)
        counts[metric] = series
    return counts
