"""Writes of fleetwatt's own counters (apps.core.metrics; why in Redis: apps.core.selectors)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from django.conf import settings

from .metrics import counter_field
from .selectors import UNREACHABLE, counter_key, metrics_redis

log = logging.getLogger(__name__)

# After a failure Redis is left alone this long: a Redis that hangs costs one timeout per process in that
# time, not one per event (the events are a task's end, a report, a page's rollup).
RETRY_AFTER_S = 5.0
_down_lock = threading.Lock()
_down_until: dict[str, float] = {}  # per Redis URL


def metric_count(*, metric: str, labels: Sequence[str], by: int = 1) -> None:
    """Add `by` to one series of a counter. Never fails its caller over Redis: with Redis unreachable the
    event is not counted (and the scrape's fleetwatt_metrics_source_up{source="redis"} shows the outage).
    A counter or label that is not in apps.core.metrics.COUNTERS is a bug: ValueError."""
    name = counter_field(metric, labels)
    url = settings.REDIS_URL
    if time.monotonic() < _down_until.get(url, 0.0):
        return
    try:
        metrics_redis().hincrby(counter_key(metric), name, by)
    except UNREACHABLE as exc:
        with _down_lock:
            if time.monotonic() >= _down_until.get(url, 0.0):
                log.warning("metrics: Redis unreachable (%s); events not counted for %.0f s", exc, RETRY_AFTER_S)
            _down_until[url] = time.monotonic() + RETRY_AFTER_S
