"""What is kept in the cache in front of the rollups and the pages, in one place: the data's generation, every key
of what is kept, and the one read-or-compute of a kept value. The API's pages (apps.core.page_cache), the dashboard's
pages (apps.dashboard.page_cache), the rollups' documents (apps.rollups.documents), the rollups themselves
(apps.rollups.selectors) and the fleet page's heatmap (apps.dashboard.heatmap) keep what they compute through it.

The data's generation is a counter in the cache that moves on whenever figures people read change (jobs, their
hours and footprints, findings, decisions, the names of teams, clusters and job groups). What is cached from
those figures is stamped with it (`kept_write`, `kept_read`, `kept_or_computed`), so no entry outlives a change.

A change bumps it twice: at once (a reader in the same transaction must not see the old figures) and when the
transaction commits (a reader outside it may have cached figures computed before the commit under the first
bump). A reader reads the generation before the data, so an entry is never newer in its stamp than in its data.

An ingest marks the generation it starts at (`ingest_started`): until the rollup documents people asked for are
prepared again after it (apps.rollups.documents), or for FLEETWATT_ROLLUPS_STALE_S at most, those kept at that
generation or later may still be served (`kept_read_or_previous`): figures as of before the ingest's hour, never
older. Any other change (an admin's edit, a decision) ends that at once: an edit is seen by the next read.

Every key is built here (`Keys` below), each with a version: a change of what a key's value holds moves its
version on, so that no entry of the older form is read as the newer."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

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


# The keys --------------------------------------------------------------------------------------------------------

# The asks recorded to be prepared again after an ingest (sorted sets: member, time asked).
ROLLUPS_ASKED_KEY = "fleetwatt:rollups:asked"  # the rollups' documents (apps.rollups.documents.Ask)
PAGES_ASKED_KEY = "fleetwatt:pages:asked"  # the dashboard's pages (apps.dashboard.page_cache)


def rollup_key(kind: str, pk: int, start: datetime, end: datetime, granularity: str) -> str:
    """A rollup's (a team's, a cluster's, a job group's: `kind`) of one period, as its selector computes it. How idle
    energy is shared decides its figures, so it is part of the key."""
    return (
        f"fleetwatt:rollup:v4:{kind}:{pk}:{start.isoformat()}:{end.isoformat()}:{granularity}:"
        f"{int(settings.FLEETWATT_IDLE_SHARED_TO_TEAMS)}"
    )


def finance_document_key(rollup: str) -> str:
    """The document finance tools read of the rollup kept under `rollup` (JSON, costs in minor units)."""
    return f"{rollup}:finance:json"


def teams_compared_key(viewer: str, start: datetime, end: datetime) -> str:
    """The teams side by side for one viewer's scope (apps.core.access.viewer_scope: the teams they may see)."""
    return f"fleetwatt:rollup:v3:teams_compared:{viewer}:{start.isoformat()}:{end.isoformat()}"


def api_page_key(viewer: str, digest: str) -> str:
    """A page of the API as sent (JSON) for one viewer's scope; `digest`: of the view, media type and whole URL."""
    return f"fleetwatt:page:v3:{viewer}:{digest}"


def html_page_key(digest: str) -> str:
    """A dashboard page as sent (HTML); `digest`: of the viewer, their scope, the hour and the whole URL."""
    return f"fleetwatt:page:html:v1:{digest}"


def making_key(key: str, generation: int) -> str:
    """The mark of a request making the value of `key` at `generation` (the others wait for it)."""
    return f"{key}:making:{generation}"


def gpu_power_grid_key(start: datetime, end: datetime) -> str:
    """The fleet page's heatmap of one period (apps.dashboard.heatmap)."""
    return f"fleetwatt:dashboard:gpu-power-grid:{start.isoformat()}:{end.isoformat()}"


# What is kept, read or computed ----------------------------------------------------------------------------------

Value = TypeVar("Value")


@dataclass(frozen=True)
class Kept(Generic[Value]):
    """A value read or computed by `kept_or_computed`; `generation`: the current one when it was read; `kept_at`: the
    generation it was kept at (None: computed now, and kept at `generation`)."""

    value: Value
    generation: int
    kept_at: int | None

    @property
    def outcome(self) -> str:
        """For the caches' metrics: "miss" (computed), "hit" (kept at the current generation) or "previous" (kept
        before an ingest in progress)."""
        return "miss" if self.kept_at is None else "hit" if self.kept_at == self.generation else "previous"


def kept_or_computed(key: str, compute: Callable[[], Value], timeout: float, *, previous: bool = False) -> Kept[Value]:
    """The value kept under `key` at the current generation, else what `compute` gives, kept there for `timeout` s.
    `previous`: while an ingest is in progress, a value kept before it is given rather than computed
    (`kept_read_or_previous`; what is made of it belongs to the generation it was kept at)."""
    if previous:
        generation, value, kept_at = kept_read_or_previous(key)
    else:
        generation, value = kept_read(key)
        kept_at = None if value is None else generation
    if value is None:
        value = compute()
        kept_write(key, generation, value, timeout)
    return Kept(value, generation, kept_at)
