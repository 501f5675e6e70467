"""What the FOCUS export reads (apps/rollups/focus_selectors.py): the month's team-days of the teams the user may see
with their sites' figures, each team-day's booked cost as the team's daily rollup books it, the clusters' idle lines
for whoever sees every team only, and the file's rows: each team-day's rows adding up to its booked cost, the idle
lines booked as the clusters' rollups book them, the allocation ratios only for whoever sees every team."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from apps.core.units.footprint import S_PER_HOUR
from apps.rollups.cost_selectors import team_job_costs_minor
from apps.rollups.focus import IDLE, JOBS, UNOBSERVED, unallocated_booked
from apps.rollups.focus_selectors import (
    focus_cluster_idle_days,
    focus_file_rows,
    focus_names,
    focus_targets,
    focus_team_days,
)
from apps.rollups.models import ClusterDay, TeamDay
from apps.rollups.selectors import CLUSTER_DAY_IDLE_COLUMNS, cluster_day_idle_line
from tests.factories import ClusterFactory, TeamDayFactory
from tests.rollups.day_world import DAY1, DAY2, END, START, DayWorld, day_world_build

pytestmark = pytest.mark.django_db

MONTH = date(2026, 11, 1)
D = Decimal


@pytest.fixture
def world() -> DayWorld:
    return day_world_build()


def test_the_months_team_days_are_the_teams_daily_sums_with_their_sites(world: DayWorld, settings: Any) -> None:
    # given a day of vision's on a cluster without a site (billed in the default currency)
    settings.FLEETWATT_FOCUS_DEFAULT_CURRENCY = "USD"
    bare = ClusterFactory(name="c-bare")
    TeamDayFactory(team=world.vision, cluster=bare, day=DAY2)
    # when finance and vision's member read the month
    everyone = focus_team_days(user=world.finance, month=MONTH)
    mine = focus_team_days(user=world.member, month=MONTH)
    # then one per daily sum of the teams they may see
    assert sorted((d.team, d.cluster, d.day) for d in everyone) == [
        ("nlp", "c1", DAY1), ("vision", "c-bare", DAY2), ("vision", "c1", DAY1), ("vision", "c1", DAY2),
    ]  # fmt: skip
    assert {d.team for d in mine} == {"vision"} and len(mine) == 3
    # each with its sums and its site's figures
    for found in everyone:
        stored = TeamDay.objects.get(team_id=found.team_id, cluster__name=found.cluster, day=found.day)
        assert (found.gpu_hours, found.energy_j, found.cost) == (stored.occupancy_s / S_PER_HOUR, stored.energy_j,
                                                                 stored.cost)  # fmt: skip
        if found.cluster == "c1":
            assert (found.currency, found.price_per_kwh, found.site, found.intensity_basis) == (
                "EUR", D("0.20"), "site-a", "location",
            )  # fmt: skip
        else:  # no site: the default currency, no price, no intensity basis
            assert (found.currency, found.price_per_kwh, found.site, found.intensity_basis) == ("USD", 0, None, None)


def test_each_team_days_booked_cost_is_what_the_teams_daily_rollup_books(world: DayWorld) -> None:
    targets = focus_targets(user=world.finance, month=MONTH)
    # the job across midnight split 0.67 + 0.66, nlp's 0.125 rounded half to even
    assert targets == {
        (world.vision.pk, DAY1, "EUR"): D("1.67"),
        (world.vision.pk, DAY2, "EUR"): D("0.66"),
        (world.nlp.pk, DAY1, "EUR"): D("0.12"),
    }
    for team in (world.vision, world.nlp):
        booked = team_job_costs_minor(team=team, start=START, end=END, granularity="day", currency="EUR")
        assert {k: v for k, v in booked.items() if v} == {
            day.isoformat(): cost for (team_id, day, _), cost in targets.items() if team_id == team.pk
        }
    # and a member's are of their team only
    assert set(focus_targets(user=world.member, month=MONTH)) == {
        (world.vision.pk, DAY1, "EUR"),
        (world.vision.pk, DAY2, "EUR"),
    }


def test_the_clusters_idle_lines_go_to_whoever_sees_every_team_only(world: DayWorld) -> None:
    assert focus_cluster_idle_days(user=world.member, month=MONTH) == []
    days = focus_cluster_idle_days(user=world.finance, month=MONTH)
    assert [(d.cluster, d.day) for d in days] == [("c1", DAY1), ("c1", DAY2)]
    for found in days:
        stored = ClusterDay.objects.filter(day=found.day).values(*CLUSTER_DAY_IDLE_COLUMNS).get()
        line = cluster_day_idle_line(stored)
        assert line is not None and (found.idle, found.unseen) == (line.idle, line.unseen)
        assert (found.currency, found.price_per_kwh, found.site) == ("EUR", D("0.20"), "site-a")


def test_the_files_rows_add_up_to_the_booked_costs_and_carry_the_ratios_for_whoever_sees_every_team(
    world: DayWorld,
) -> None:
    rows = focus_file_rows(user=world.finance, month=MONTH)
    # each team-day's rows add up to its booked cost
    billed: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for row in rows:
        if row["x_CostLine"] == JOBS:
            billed[(row["SubAccountName"], row["ChargePeriodStart"][:10])] += row["BilledCost"]
    assert billed == {("vision", "2026-11-02"): D("1.67"), ("vision", "2026-11-03"): D("0.66"),
                      ("nlp", "2026-11-02"): D("0.12")}  # fmt: skip
    # the clusters' idle lines, booked as their daily rollups book them (day 1's half unseen)
    for found in focus_cluster_idle_days(user=world.finance, month=MONTH):
        booked = unallocated_booked(idle_cost=found.idle.cost, unseen_cost=found.unseen.cost, currency="EUR")
        day = found.day.isoformat()
        for line in (IDLE, UNOBSERVED):
            of_line = [r["BilledCost"] for r in rows if (r["x_CostLine"], r["ChargePeriodStart"][:10]) == (line, day)]
            assert sum(of_line, D(0)) == booked[line], (day, line)
    assert any(r["x_CostLine"] == IDLE for r in rows)
    # every row allocated from its origin charge, each origin's ratios adding up to 1
    ratios: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows:
        details = json.loads(row["AllocatedMethodDetails"])
        ratios[(row["ResourceName"], row["ChargePeriodStart"], row["AllocatedMethodId"])] += details["Elements"][0][
            "AllocatedRatio"
        ]
    assert all(total == pytest.approx(1.0) for total in ratios.values())


def test_a_member_gets_their_teams_rows_with_no_ratio_and_no_idle_line(world: DayWorld) -> None:
    rows = focus_file_rows(user=world.member, month=MONTH)
    assert rows and {r["SubAccountName"] for r in rows} == {"vision"}
    assert {r["x_CostLine"] for r in rows} == {JOBS}
    assert all(r["AllocatedMethodDetails"] is None and r["AllocatedMethodId"] for r in rows)


def test_who_bills_whom_comes_from_the_settings(settings: Any) -> None:
    settings.FLEETWATT_FOCUS_BILLING_ACCOUNT_ID = "acct-7"
    settings.FLEETWATT_FOCUS_PROVIDER_NAME = "Research computing"
    names = focus_names()
    assert (names.billing_account_id, names.provider_name) == ("acct-7", "Research computing")
