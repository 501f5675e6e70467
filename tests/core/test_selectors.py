"""apps.core.selectors: fleetwatt's own counters read back from Redis, where every process counts them. Every counter is
in the answer (an empty one too), each series under its label values with its count; a field of a counter's hash
that is not one of its series (another version's, one written by hand) is left out rather than misread; an
unreachable Redis is None, never zeros (a scrape would read zeros as a counter reset). One client per Redis URL, with
the cache's timeouts. The exposition itself: tests/core/test_metrics.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from apps.core import metrics as m
from apps.core import selectors
from apps.core.selectors import KEY_PREFIX, counter_key, metric_counts_read, metrics_redis
from apps.core.services import metric_count

DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def _no_counts() -> Iterator[None]:
    client = metrics_redis()
    for metric in m.COUNTERS:
        client.delete(counter_key(metric))
    yield
    for metric in m.COUNTERS:
        client.delete(counter_key(metric))


def test_every_counter_is_read_with_each_series_and_its_count() -> None:
    # given events counted as the app counts them
    for _ in range(3):
        metric_count(metric=m.CELERY_TASKS, labels=["apps.telemetry.tasks.ingest_hour_task", "success"])
    metric_count(metric=m.CELERY_TASKS, labels=["apps.telemetry.tasks.ingest_hour_task", "failure"])
    metric_count(metric=m.REPORTS_SENT, labels=["sent"], by=5)
    # when they are read
    counts = metric_counts_read()
    # then each series has its count, and every counter is there
    assert counts is not None
    assert set(counts) == set(m.COUNTERS)
    assert counts[m.CELERY_TASKS] == {
        ("apps.telemetry.tasks.ingest_hour_task", "success"): 3.0,
        ("apps.telemetry.tasks.ingest_hour_task", "failure"): 1.0,
    }
    assert counts[m.REPORTS_SENT] == {("sent",): 5.0}
    assert counts[m.ROLLUP_CACHE] == {} and counts[m.PAGE_CACHE] == {}


def test_a_field_that_is_not_one_of_the_counters_series_is_left_out() -> None:
    client = metrics_redis()
    metric_count(metric=m.ROLLUP_CACHE, labels=["hit"])
    client.hset(counter_key(m.ROLLUP_CACHE), "not json", 7)
    client.hset(counter_key(m.ROLLUP_CACHE), '["hit", "extra"]', 7)  # another version's labels
    client.hset(counter_key(m.ROLLUP_CACHE), '{"result": "hit"}', 7)
    counts = metric_counts_read()
    assert counts is not None and counts[m.ROLLUP_CACHE] == {("hit",): 1.0}


def test_label_values_keep_what_json_carries() -> None:
    task = 'apps.x.tasks.odd "name", with\\ marks'
    metric_count(metric=m.CELERY_TASKS, labels=[task, "retry"])
    counts = metric_counts_read()
    assert counts is not None and counts[m.CELERY_TASKS] == {(task, "retry"): 1.0}


def test_an_unreachable_redis_is_none_not_zeros(settings, caplog) -> None:
    settings.REDIS_URL = DEAD_REDIS
    assert metric_counts_read() is None
    assert "metrics: Redis unreachable" in caplog.text


def test_one_client_per_redis_url_with_the_caches_timeouts(settings) -> None:
    first = metrics_redis()
    assert metrics_redis() is first
    settings.REDIS_URL = DEAD_REDIS
    other = metrics_redis()
    assert other is not first and isinstance(other, redis.Redis)
    timeout = settings.CACHES["default"].get("OPTIONS", {}).get("socket_timeout", 1.0)
    kwargs = other.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == timeout
    assert selectors._clients[DEAD_REDIS] is other
    assert counter_key(m.REPORTS_SENT) == KEY_PREFIX + m.REPORTS_SENT
