"""apps.core.fail_open_cache, against the real Redis with its client made to fail as an unreachable Redis fails (a
connection error from every call). While Redis is out, a read is a miss and a write is skipped, with one warning per
outage; it is left alone for `retry_after_s`. The writes it missed are applied first when it answers again: a key
set or deleted meanwhile is deleted (never a stale value, such as a session deleted at logout), a missed increment
is replayed (the rollups' generation moves on, never back), and they stay pending while it is still out. A
programming error still raises. The counters and sorted sets fail open as the rest."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from apps.core import fail_open_cache
from apps.core.fail_open_cache import FailOpenRedisCache


class Outage:
    """Makes the cache's Redis client fail as an unreachable Redis does, and counts what is asked of it."""

    def __init__(self, cache: FailOpenRedisCache) -> None:
        self.down = False
        self.calls = 0
        real = cache._cache.get_client

        def get_client(*args: Any, **kwargs: Any) -> redis.Redis:
            self.calls += 1
            if self.down:
                raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
            return real(*args, **kwargs)

        cache._cache.get_client = get_client  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _own_reachability(monkeypatch: pytest.MonkeyPatch) -> None:
    # what this process knows of the Redis, apart from the app's own cache's (the same server)
    monkeypatch.setattr(fail_open_cache, "_REDISES", {})


def _cache(settings: Any, retry_after_s: float = 0.0) -> FailOpenRedisCache:
    return FailOpenRedisCache(
        settings.REDIS_URL,
        {"KEY_PREFIX": "fail-open-test", "OPTIONS": {"socket_timeout": 1.0, "retry_after_s": retry_after_s}},
    )


@pytest.fixture
def cache(settings: Any) -> Iterator[FailOpenRedisCache]:
    cache = _cache(settings)
    cache.clear()
    yield cache
    cache.clear()


def test_while_redis_is_out_reads_miss_and_writes_are_skipped(cache: FailOpenRedisCache, caplog) -> None:
    # given a value stored, then Redis out
    cache.set("kept", "v")
    outage = Outage(cache)
    outage.down = True
    # when every kind of call is made
    with caplog.at_level(logging.WARNING, logger="apps.core.fail_open_cache"):
        assert cache.get("kept") is None and cache.get("kept", "default") == "default"
        assert cache.get_many(["kept", "other"]) == {}
        assert cache.has_key("kept") is False
        cache.set("a", 1)
        assert cache.add("b", 1) is False and cache.touch("kept") is False and cache.delete("kept") is False
        assert cache.set_many({"c": 1, "d": 2}) == ["c", "d"]  # every key failed
        cache.delete_many(["c", "d"])
        with pytest.raises(ValueError, match="unreachable"):
            cache.incr("n")
        assert cache.window_count("w", timeout=60) is None
        assert cache.sorted_top("s", min_score=0, count=5) == []
        cache.sorted_add("s", "m", 1.0, keep=3), cache.sorted_remove("s", "m"), cache.clear()
    # then nothing raised, and the outage was said once
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cache unreachable (ConnectionError on get" in warnings[0].getMessage()


def test_health_checks_see_the_outage(cache: FailOpenRedisCache) -> None:
    assert cache.ping() is True
    Outage(cache).down = True
    with pytest.raises(redis.ConnectionError):
        cache.ping()


def test_missed_writes_are_applied_first_when_redis_answers_again(cache: FailOpenRedisCache, caplog) -> None:
    # given a session, a value and a generation counter stored
    cache.set("session:ada", "logged in")
    cache.set("page", "old")
    cache.set("generation", 5)
    outage = Outage(cache)
    # when, with Redis out, the session is deleted (logout), the page set anew and the generation moved on twice
    outage.down = True
    cache.delete("session:ada")
    cache.set("page", "new")
    for _ in range(2):
        with pytest.raises(ValueError):
            cache.incr("generation")
    # and Redis comes back
    outage.down = False
    with caplog.at_level(logging.INFO, logger="apps.core.fail_open_cache"):
        first_read = cache.get("session:ada")
    # then the logout holds, the stale page is gone rather than served, and the generation moved on by both
    assert first_read is None
    assert cache.get("page") is None
    assert cache.get("generation") == 7
    assert "3 writes it missed during the outage replayed" in caplog.text
    assert "cache reachable again" in caplog.text


def test_an_increment_missed_wins_over_a_set_or_delete_of_the_same_key(cache: FailOpenRedisCache) -> None:
    cache.set("generation", 10)
    outage = Outage(cache)
    outage.down = True
    cache.set("generation", 0)  # a write that would move it back
    with pytest.raises(ValueError):
        cache.incr("generation")
    cache.delete("generation")
    outage.down = False
    assert cache.get("generation") == 11  # on, never back


def test_a_missed_increment_of_a_key_gone_meanwhile_is_not_made_up(cache: FailOpenRedisCache) -> None:
    outage = Outage(cache)
    outage.down = True
    with pytest.raises(ValueError):
        cache.incr("absent")
    outage.down = False
    assert cache.get("absent") is None and not cache.has_key("absent")


def test_missed_writes_stay_pending_while_redis_is_still_out(cache: FailOpenRedisCache) -> None:
    cache.set("page", "old")
    outage = Outage(cache)
    outage.down = True
    cache.delete("page")
    assert cache.get("page") is None  # tried again (retry_after_s 0): still out, the delete kept
    assert cache._redis.pending == {cache.make_and_validate_key("page"): None}
    outage.down = False
    assert cache.get("page") is None and cache._redis.pending == {}


def test_an_unreachable_redis_is_left_alone_for_retry_after_s(settings) -> None:
    cache = _cache(settings, retry_after_s=60.0)
    outage = Outage(cache)
    outage.down = True
    cache.get("x")
    asked = outage.calls
    # even once it is back, the process waits out its retry_after_s: one timeout per process, not per call
    outage.down = False
    for _ in range(20):
        assert cache.get("x") is None
        cache.set("x", 1)
    assert outage.calls == asked


def test_the_caches_of_one_redis_share_what_they_know(settings) -> None:
    first, second = _cache(settings, retry_after_s=60.0), _cache(settings, retry_after_s=60.0)
    Outage(first).down = True
    first.get("x")
    outage = Outage(second)
    assert second.get("x") is None and outage.calls == 0  # another thread's cache object: left alone too


def test_past_max_pending_the_rest_are_dropped_and_said_so(cache: FailOpenRedisCache, monkeypatch, caplog) -> None:
    monkeypatch.setattr(fail_open_cache, "MAX_PENDING", 2)
    Outage(cache).down = True
    with caplog.at_level(logging.ERROR, logger="apps.core.fail_open_cache"):
        cache.delete_many(["a", "b", "c"])
    assert len(cache._redis.pending) == 2
    assert "more than 2 missed writes; 1 more are not replayed" in caplog.text


def test_a_programming_error_still_raises(cache: FailOpenRedisCache) -> None:
    cache.set("text", "not a number")
    with pytest.raises(redis.ResponseError):
        cache.incr("text")
    assert cache._redis.down_since is None  # and Redis is not taken for out


def test_a_window_counter_counts_up_and_expires_from_its_first_count(cache: FailOpenRedisCache) -> None:
    assert [cache.window_count("token:1:w", timeout=90) for _ in range(3)] == [1, 2, 3]
    assert cache.window_count("token:2:w", timeout=90) == 1
    ttl = cache._cache.get_client(write=True).ttl(cache.make_and_validate_key("token:1:w"))
    assert 85 <= ttl <= 90


def test_a_sorted_set_keeps_its_highest_and_answers_them_highest_first(cache: FailOpenRedisCache) -> None:
    for member, score in [("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 4.0)]:
        cache.sorted_add("asked", member, score, keep=3)
    assert cache.sorted_top("asked", min_score=0, count=10) == ["b", "d", "c"]  # "a", the lowest, dropped
    assert cache.sorted_top("asked", min_score=3.5, count=10) == ["b", "d"]
    assert cache.sorted_top("asked", min_score=0, count=1) == ["b"]
    cache.sorted_remove("asked", "d")
    assert cache.sorted_top("asked", min_score=0, count=10) == ["b", "c"]


def test_the_option_is_read_and_not_passed_to_redis(settings) -> None:
    cache = _cache(settings, retry_after_s=7.5)
    assert cache.retry_after_s == 7.5 and "retry_after_s" not in cache._options
    assert FailOpenRedisCache(settings.REDIS_URL, {}).retry_after_s == 5.0
