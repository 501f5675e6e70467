"""apps.core.kept: what is kept in front of the rollups and pages, at the data's generation, under keys built in one
place."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.core import kept
from apps.core.kept import (
    api_page_key,
    data_changed,
    finance_document_key,
    gpu_power_grid_key,
    html_page_key,
    ingest_prepared,
    ingest_started,
    ingest_started_at,
    kept_or_computed,
    making_key,
    rollup_key,
    teams_compared_key,
)

pytestmark = pytest.mark.django_db  # (a change is bumped again when its transaction commits)

JUNE, JULY = datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 7, 1, tzinfo=UTC)


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def test_a_value_is_computed_once_per_generation() -> None:
    compute = Counter()
    first = kept_or_computed("fleetwatt:test:kept", compute, 60)
    again = kept_or_computed("fleetwatt:test:kept", compute, 60)
    assert (first.value, first.outcome) == (1, "miss")
    assert (again.value, again.outcome) == (1, "hit")
    assert compute.calls == 1


def test_a_change_makes_the_next_read_compute_again() -> None:
    compute = Counter()
    kept_or_computed("fleetwatt:test:kept", compute, 60)
    data_changed()
    after = kept_or_computed("fleetwatt:test:kept", compute, 60)
    assert (after.value, after.outcome, compute.calls) == (2, "miss", 2)
    assert after.generation == kept.data_generation()


def test_during_an_ingest_the_value_kept_before_it_is_given_where_asked(settings) -> None:
    settings.FLEETWATT_ROLLUPS_STALE_S = 60
    compute = Counter()
    before = kept_or_computed("fleetwatt:test:kept", compute, 60, previous=True)
    ingest_started()
    data_changed(by_ingest=True)
    during = kept_or_computed("fleetwatt:test:kept", compute, 60, previous=True)
    assert (during.value, during.outcome, during.kept_at) == (1, "previous", before.generation)
    # a reader that may not take figures older than the data computes them
    assert kept_or_computed("fleetwatt:test:kept", compute, 60).value == 2
    ingest_prepared(ingest_started_at())
    assert ingest_started_at() is None


def test_an_edit_during_an_ingest_ends_the_previous_figures_at_once(settings) -> None:
    settings.FLEETWATT_ROLLUPS_STALE_S = 60
    compute = Counter()
    kept_or_computed("fleetwatt:test:kept", compute, 60, previous=True)
    ingest_started()
    data_changed()  # an admin's edit
    assert kept_or_computed("fleetwatt:test:kept", compute, 60, previous=True).outcome == "miss"


@pytest.mark.parametrize("idle_shared", [False, True])
def test_keys_name_what_they_keep_and_differ_where_the_figures_differ(settings, idle_shared: bool) -> None:
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = idle_shared
    team = rollup_key("team", 3, JUNE, JULY, "day")
    assert team.startswith("fleetwatt:rollup:v4:team:3:2026-06-01")
    assert team.endswith(f":day:{int(idle_shared)}")
    keys = {
        team,
        rollup_key("cluster", 3, JUNE, JULY, "day"),
        rollup_key("team", 3, JUNE, JULY, "month"),
        finance_document_key(team),
        teams_compared_key("teams:3", JUNE, JULY),
        api_page_key("teams:3", "abc"),
        html_page_key("abc"),
        making_key(html_page_key("abc"), 7),
        gpu_power_grid_key(JUNE, JULY),
    }
    assert len(keys) == 9
    assert all(k.startswith("fleetwatt:") for k in keys)
