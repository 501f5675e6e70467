"""The data's generation: a counter in the cache that moves on whenever figures people read change (jobs, their
hours and footprints, findings, decisions, the names of teams, clusters and job groups). What is cached from
those figures (rollups, pages of the API's lists) has the generation in its key, so no entry outlives a change.

A change bumps it twice: at once (a reader in the same transaction must not see the old figures) and when the
transaction commits (a reader outside it may have cached figures computed before the commit under the first
bump). A reader reads the generation before the data, so an entry is never newer in its key than in its data."""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

# The key's name is older than its use beyond the rollups (a new name would restart at 0, where entries of
# an earlier generation 0 may still be).
GENERATION_KEY = "fleetwatt:rollups:generation"


def data_generation() -> int:
    """The current generation (0 when the cache holds none, e.g. after Redis restarted empty)."""
    return int(cache.get(GENERATION_KEY, 0))


def data_changed() -> None:
    """Figures changed (or will, when this transaction commits): every entry cached from them is stale. Called
    once per write of many rows (a derivation, an hour's jobs), not per row."""
    _bump()
    transaction.on_commit(_bump)


def _bump() -> None:
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # no generation yet
        cache.set(GENERATION_KEY, 1, timeout=None)
