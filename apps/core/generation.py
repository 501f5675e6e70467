"""The data's generation: a counter in the cache that moves on whenever figures people read change (jobs, their
hours and footprints, findings, decisions, the names of teams, clusters and job groups). What is cached from
those figures is stamped with it (`kept_write`, `kept_read`: rollups, pages of the API), so no entry outlives a
change.

A change bumps it twice: at once (a reader in the same transaction must not see the old figures) and when the
transaction commits (a reader outside it may have cached figures computed before the commit under the first
bump). A reader reads the generation before the data, so an entry is never newer in its stamp than in its data."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from django.core.cache import cache
from django.db import transaction

# The key's name is older than its use beyond the rollups (a new name would restart at 0, where entries of
# an earlier generation 0 may still be).
GENERATION_KEY = "fleetwatt:rollups:generation"


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


def kept_write(key: str, generation: int, value: Any, timeout: float) -> None:
    """`value`, computed from data read after `generation` was, kept under `key` for `kept_read`: one entry per key,
    replaced at the next generation's, not left beside it until it expires."""
    cache.set(key, (generation, value), timeout)


def data_changed() -> None:
    """Figures changed (or will, when this transaction commits): every entry cached from them is stale. Called
    once per write of many rows (a derivation, an hour's jobs), not per row."""
    _bump()
    transaction.on_commit(_bump)


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
