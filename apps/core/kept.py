"""The data's generation: a counter in the cache that moves on whenever figures people read change (jobs, their
hours and footprints, findings, decisions, the names of teams, clusters and job groups). What is cached from
those figures is stamped with it (`kept_write`, `kept_read`: rollups, pages of the API), so no entry outlives a
change.

A change bumps it twice: at once (a reader in the same transaction must not see the old figures) and when the
transaction commits (a reader outside it may have cached figures computed before the commit under the first
bump). A reader reads the generation before the data, so an entry is never newer in its stamp than in its data.

An ingest marks the generation it starts at (`ingest_started`): until the rollup documents people asked for are
prepared again after it (apps.rollups.documents), or for FLEETWATT_ROLLUPS_STALE_S at most, those kept at that
generation or later may still be served (`kept_read_or_previous`): figures as of before the ingest's hour, never
older. Any other change (an admin's edit, a decision) ends that at once: an edit is seen by the next read."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

# The key's name is older than its use beyond the rollups (a new name would restart at 0, where entries of
# an earlier generation 0 may still be).
GENERATION_KEY = "fleetwatt:rollups:generation"
# The generation an ingest in progress started at (absent: none is, or an edit came since).
INGEST_STARTED_KEY = "fleetwatt:rollups:ingest-started"
# Set while what people asked for is prepared again after an ingest (`current_reads`): no entry kept before it.
_CURRENT_ONLY: ContextVar[bool] = ContextVar("fleetwatt_current_reads", default=False)


def data_generation() -> int:
    """The current generation (0 when the cache holds none, e.g. after Redis restarted empty)."""
    return int(cache.get(GENERATION_KEY, 0))


def kept_read(key: str) -> tuple[int, Any]:
    """What `kept_write` kept under `key` if kept at the current generation (else None), and that generation (to
    keep what is computed now under): one round trip for both."""
    found = cache.get_many([GENERATION_KEY, key])
    generation, kept = found.get(GENERATION_KEY), found.get(key)
    if generation is None:  # Redis forgot it (restarted empty, evicted): what is kept may be of any generation
        cache.add(GENERATION_KEY, _fresh_start(), timeout=None)
        return data_generation(), None
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == generation:
        return generation, kept[1]
    return generation, None


def kept_read_or_previous(key: str) -> tuple[int, Any, int | None]:
    """As kept_read, and the generation what it gives was kept at (None for nothing): while an ingest is in
    progress (`ingest_started`), an entry kept at the generation it started at or later is given rather than
    None. Keep what is made of such an entry under its generation, never the current one (its figures are older)."""
    if _CURRENT_ONLY.get():
        current, value = kept_read(key)
        return current, value, None if value is None else current
    found = cache.get_many([GENERATION_KEY, INGEST_STARTED_KEY, key])
    generation, started, kept = found.get(GENERATION_KEY), found.get(INGEST_STARTED_KEY), found.get(key)
    if generation is None:
        generation, kept = kept_read(key)
        return generation, kept, None if kept is None else generation
    if not (isinstance(kept, tuple) and len(kept) == 2):
        return generation, None, None
    if kept[0] == generation or (started is not None and started <= kept[0] < generation):
        return generation, kept[1], kept[0]
    return generation, None, None


@contextlib.contextmanager
def current_reads() -> Iterator[None]:
    """Within it, `kept_read_or_previous` gives only what is kept at the current generation, as `kept_read`: what
    is prepared after an ingest (a page made of rollup documents) is made of current documents only, computing
    those not prepared."""
    token = _CURRENT_ONLY.set(True)
    try:
        yield
    finally:
        _CURRENT_ONLY.reset(token)


def keep_generation(generation: int) -> int:
    """The generation to keep under what was computed from data read after `generation` was (the current one then),
    where it may be made of entries kept before an ingest in progress (`kept_read_or_previous`): the generation
    that ingest started at, so that it is served while the ingest is, and computed again once it is done; else
    `generation` itself."""
    if _CURRENT_ONLY.get():
        return generation
    started = cache.get(INGEST_STARTED_KEY)
    return int(started) if started is not None and int(started) <= generation else generation


def ingest_started() -> None:
    """An ingest is about to write (call it before its first write): until the documents asked for are prepared
    again, FLEETWATT_ROLLUPS_STALE_S at most, or any other change, those kept now may be served in its stead
    (`kept_read_or_previous`). An ingest already in progress keeps its earlier mark."""
    window = settings.FLEETWATT_ROLLUPS_STALE_S
    if window <= 0:
        return
    generation = data_generation()
    if cache.add(INGEST_STARTED_KEY, generation, timeout=window) and data_generation() != generation:
        # Something changed between the two reads: it may have been an edit, whose figures must not wait.
        cache.delete(INGEST_STARTED_KEY)


def ingest_prepared(started: int | None) -> None:
    """The documents asked for are prepared after the ingest that started at `started` (the mark read before
    preparing them): nothing kept before it is served any more."""
    if started is not None and cache.get(INGEST_STARTED_KEY) == started:
        cache.delete(INGEST_STARTED_KEY)


def ingest_started_at() -> int | None:
    """The generation the ingest in progress started at, if one is."""
    started = cache.get(INGEST_STARTED_KEY)
    return int(started) if started is not None else None


def kept_write(key: str, generation: int, value: Any, timeout: float) -> None:
    """`value`, computed from data read after `generation` was, kept under `key` for `kept_read`: one entry per key,
    replaced at the next generation's, not left beside it until it expires."""
    cache.set(key, (generation, value), timeout)


def data_changed(*, by_ingest: bool = False) -> None:
    """Figures changed (or will, when this transaction commits): every entry cached from them is stale. Called
    once per write of many rows (a derivation, an hour's jobs), not per row. `by_ingest`: an ingest's write
    (an ingest in progress may still serve what was kept before it); any other change ends that at once."""
    _bump()
    transaction.on_commit(_bump)
    if not by_ingest:
        _previous_forbid()
        transaction.on_commit(_previous_forbid)


def _previous_forbid() -> None:
    cache.delete(INGEST_STARTED_KEY)


def _bump() -> None:
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # no generation yet, Redis forgot it, or Redis is unreachable
        if cache.add(GENERATION_KEY, _fresh_start(), timeout=None):
            return  # a fresh start is past every generation before it
        # Another process started it first; or Redis is unreachable, and fail_open_cache replays the missed
        # increment when it answers again.
        with contextlib.suppress(ValueError):
            cache.incr(GENERATION_KEY)


def _fresh_start() -> int:
    # Past every generation counted before (they count up from small numbers), so nothing kept under one of
    # them is taken for the new one's: microseconds since 1970 (2^63 is 290,000 years away).
    return time.time_ns() // 1000
