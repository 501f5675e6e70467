"""Django's Redis cache, failing open: when Redis cannot be reached, a read is a miss and a write is
skipped, with one log line per outage, instead of an exception in every request.

What leans on the cache then degrades instead of dying: sessions (`cached_db`) are read from and written
to Postgres alone, the API tokens' throttles let requests through, rollups are computed on each request.
After a failure Redis is left alone for `retry_after_s` (an option), so a Redis that hangs costs one
socket timeout per process in that time, not one per cache call.

A write Redis missed may leave a stale value there, if Redis kept its data (a network partition, a
stall, rather than a restart): a session deleted at logout would log its owner in again. So the keys of
missed writes are remembered, and deleted from Redis (a missed `incr` is replayed instead: the rollups'
generation must move on, never back) the first time Redis answers again, before anything else is read.
They are remembered per process and Redis (Django makes a cache object per thread: the threads share
this), up to `MAX_PENDING` keys."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

log = logging.getLogger(__name__)

T = TypeVar("T")

# Errors that mean "Redis is not there now"; a programming error (a bad command, a wrong type) still raises.
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ReadOnlyError, OSError)
MAX_PENDING = 10_000
_MISSED = object()


@dataclass
class _Reachability:
    """What this process knows of one Redis: whether to leave it alone, and the writes it missed."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    down_until: float = 0.0  # time.monotonic() before which Redis is not tried
    down_since: float | None = None
    # Writes Redis missed, by versioned key: None to delete the key, or the increment to replay.
    pending: dict[str, int | None] = field(default_factory=dict)


_REDISES: dict[str, _Reachability] = {}
_REDISES_LOCK = threading.Lock()


def _reachability(server: str) -> _Reachability:
    with _REDISES_LOCK:
        return _REDISES.setdefault(server, _Reachability())


class _ClientPerPool(RedisCacheClient):
    """Django's client, keeping one redis.Redis per connection pool where Django builds one per call (a
    fifth of a cached read's time). A redis.Redis is safe to share; the pool hands out the connections."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, redis.Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> redis.Redis:
        # (Django's private helpers, absent from its type stubs.)
        index: int = self._get_connection_pool_index(write)  # type: ignore[attr-defined]
        client = self._clients.get(index)
        if client is None:
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
            client = self._clients[index] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class FailOpenRedisCache(RedisCache):
    """django.core.cache.backends.redis.RedisCache that reads as a miss and skips writes while Redis is
    unreachable. Option `retry_after_s` (default 5): how long to leave an unreachable Redis alone."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        options = dict(params.get("OPTIONS") or {})
        self.retry_after_s = float(options.pop("retry_after_s", 5.0))
        super().__init__(server, {**params, "OPTIONS": options})
        self._class = _ClientPerPool
        self._redis = _reachability(str(server))

    # Reads: a miss while Redis is unreachable.
    def get(self, key: Any, default: Any | None = None, version: int | None = None) -> Any:
        return self._read("get", key, default, super().get, key, default, version)

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        keys = list(keys)
        return self._read("get_many", keys[0] if keys else None, {}, super().get_many, keys, version)

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._read("has_key", key, False, super().has_key, key, version)

    # Writes: skipped while Redis is unreachable, their keys remembered.
    def set(self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._write("set", [key], version, super().set, key, value, timeout, version)

    def add(self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._write("add", [key], version, super().add, key, value, timeout, version) is True

    def touch(self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._write("touch", [key], version, super().touch, key, timeout, version) is True

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._write("delete", [key], version, super().delete, key, version) is True

    def set_many(
        self, data: dict[Any, Any], timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        failed = self._write("set_many", list(data), version, super().set_many, data, timeout, version)
        return list(data) if failed is _MISSED else failed  # type: ignore[return-value]

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        keys = list(keys)
        self._write("delete_many", keys, version, super().delete_many, keys, version)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """While Redis is unreachable: ValueError, as for a missing key (callers handle that already),
        and the increment is replayed when Redis answers again."""
        value = self._read("incr", key, _MISSED, super().incr, key, delta, version)
        if value is _MISSED:
            self._remember([self.make_and_validate_key(key, version=version)], increment=delta)
            raise ValueError(f"Key '{key}' not found: the cache is unreachable.")
        return int(value)

    def clear(self) -> None:
        self._read("clear", None, None, super().clear)

    # A counter per time window (apps.core.authentication's throttle of API tokens); fails open as the rest.
    def window_count(self, key: Any, *, timeout: int) -> int | None:
        """`key` counted up by one, made to expire `timeout` s after its first count, in one round trip (INCR, then
        EXPIRE NX: only a counter without an expiry gets one); its new count, or None while Redis is unreachable.
        The value is a plain integer (INCR's own), not a pickled one: read it with this method only."""
        name = self.make_and_validate_key(key)

        def count() -> int:
            with self._cache.get_client(name, write=True).pipeline(transaction=False) as pipe:
                pipe.incr(name)
                pipe.expire(name, timeout, nx=True)
                counted, _ = pipe.execute()
            return int(counted)

        return cast(int | None, self._read("window_count", key, None, count))

    # A sorted set (apps.rollups.documents: what was asked for, by when); fails open as the rest.
    def sorted_add(self, key: Any, member: str, score: float, *, keep: int) -> None:
        """`member` with `score` in the sorted set `key`, which keeps its `keep` highest (one round trip)."""
        name = self.make_and_validate_key(key)

        def add() -> None:
            with self._cache.get_client(name, write=True).pipeline(transaction=False) as pipe:
                pipe.zadd(name, {member: score})
                pipe.zremrangebyrank(name, 0, -keep - 1)
                pipe.execute()

        self._read("sorted_add", key, None, add)

    def sorted_top(self, key: Any, *, min_score: float, count: int) -> list[str]:
        """The set's members of `min_score` or more, highest first, at most `count` (none while unreachable)."""
        name = self.make_and_validate_key(key)

        def top() -> list[str]:
            found = self._cache.get_client(name).zrevrangebyscore(name, "+inf", min_score, start=0, num=count)
            return [m.decode() if isinstance(m, bytes) else str(m) for m in found]

        return self._read("sorted_top", key, [], top)

    def sorted_remove(self, key: Any, member: str) -> None:
        name = self.make_and_validate_key(key)
        self._read("sorted_remove", key, None, lambda: self._cache.get_client(name, write=True).zrem(name, member))

    def ping(self) -> bool:
        """Whether Redis answers now (for /healthz): raises what the client raises, never fails open."""
        return bool(self._cache.get_client(write=True).ping())

    # The machinery.
    def _write(self, op: str, keys: list[Any], version: int | None, call: Callable[..., T], *args: Any) -> T | object:
        done = self._read(op, keys[0] if keys else None, _MISSED, call, *args)
        if done is _MISSED:
            self._remember([self.make_and_validate_key(k, version=version) for k in keys], increment=None)
        return done

    def _read(self, op: str, key: Any, default: Any, call: Callable[..., Any], *args: Any) -> Any:
        if time.monotonic() < self._redis.down_until:
            return default
        try:
            self._replay()
            result = call(*args)
        except UNREACHABLE as exc:
            self._trip(op, key, exc)
            return default
        if self._redis.down_since is not None:
            self._recovered()
        return result

    def _trip(self, op: str, key: Any, exc: BaseException) -> None:
        state = self._redis
        with state.lock:
            first = state.down_since is None
            if first:
                state.down_since = time.monotonic()
            state.down_until = time.monotonic() + self.retry_after_s
        if first:
            log.warning(
                "cache unreachable (%s on %s of %r): running without it, trying again every %.0fs; sessions are "
                "read from Postgres, API token throttles let requests through, rollups are computed",
                exc.__class__.__name__,
                op,
                key,
                self.retry_after_s,
            )

    def _recovered(self) -> None:
        state = self._redis
        with state.lock:
            since, state.down_since = state.down_since, None
        if since is not None:
            log.info("cache reachable again after %.0fs", time.monotonic() - since)

    def _remember(self, keys: list[str], *, increment: int | None) -> None:
        """A missed increment wins over a missed set or delete of the same key (the rollups' generation
        is incremented, or set when missing: it must move on, never back)."""
        state, dropped = self._redis, 0
        with state.lock:
            for key in keys:
                if key not in state.pending and len(state.pending) >= MAX_PENDING:
                    dropped += 1
                    continue
                held = state.pending.get(key)
                if increment is not None:
                    state.pending[key] = (held or 0) + increment
                elif key not in state.pending:
                    state.pending[key] = None
        if dropped:
            log.error("cache unreachable: more than %d missed writes; %d more are not replayed", MAX_PENDING, dropped)

    def _replay(self) -> None:
        """Apply the writes Redis missed before anything else is asked of it (raises when it is still
        unreachable: the caller fails open, and they stay pending)."""
        state = self._redis
        if not state.pending:
            return
        with state.lock:
            pending, state.pending = state.pending, {}
        try:
            client = self._cache.get_client(write=True)
            deletes = [key for key, increment in pending.items() if increment is None]
            if deletes:
                client.delete(*deletes)
            for key, increment in pending.items():
                if increment is not None and client.exists(key):
                    client.incrby(key, increment)
        except UNREACHABLE:
            with state.lock:
                for key, increment in pending.items():
                    state.pending.setdefault(key, increment)
            raise
        log.info("cache: %d writes it missed during the outage replayed", len(pending))
