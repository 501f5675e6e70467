"""The teams side by side (apps/rollups/compare_selectors.py): each team the user may see, its figures its daily
sums' and its cost the sum of its jobs' rounded costs (as its rollup books it), its old columns first and finance's
after them; a team over two intensity bases left out; each team's GPU energy per day and split method."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser

from apps.core.units.footprint import J_PER_KWH
from apps.rollups.compare_selectors import team_daily_energy, team_totals, teams_compared
from apps.rollups.cost_selectors import team_job_costs_minor
from apps.rollups.services import day_sums_refresh
from tests.factories import ClusterFactory, JobFactory, JobGpuHourFactory, SiteFactory, TeamDayFactory
from tests.rollups.day_world import DAY1, DAY2, END, HOUR, ROW_J, START, T0, DayWorld, day_world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> DayWorld:
    return day_world_build()


def test_each_team_the_user_may_see_has_its_daily_sums_side_by_side(world: DayWorld) -> None:
    # when finance and a member of vision compare the teams
    everyone = team_totals(user=world.finance, start=START, end=END)
    mine = team_totals(user=world.member, start=START, end=END)
    # then finance sees both teams by name, a member their own, nobody logged in none
    assert [t["team"] for t in everyone] == ["nlp", "vision"]
    assert mine == [everyone[1]]
    assert team_totals(user=AnonymousUser(), start=START, end=END) == []
    # each its billed jobs' figures (vision's excluded job on nobody's), its cost exact, as text
    vision = everyone[1]
    assert (vision["display_name"], vision["currency"]) == ("Vision", "EUR")
    assert (vision["gpu_hours"], vision["energy_j"]) == (pytest.approx(7.0), pytest.approx(7 * ROW_J))
    assert vision["cost"] == str(Decimal("0.333333") * 7)
    assert everyone[0]["cost"] == "0.125000" and everyone[0]["gpu_hours"] == pytest.approx(1.0)


def test_a_team_over_two_intensity_bases_is_left_out(world: DayWorld) -> None:
    # given a day of nlp's on a cluster whose site reports market-based intensity
    market = ClusterFactory(name="c2", site=SiteFactory(name="site-m", grid_zone="FR", intensity_basis="market"))
    TeamDayFactory(team=world.nlp, cluster=market, day=DAY2)
    # then only vision is compared
    assert [t["team"] for t in team_totals(user=world.finance, start=START, end=END)] == ["vision"]


def test_each_teams_cost_is_its_jobs_rounded_costs_as_its_rollup_books_them(world: DayWorld) -> None:
    # given a second job of nlp's within day 1 at 0.125: its two jobs 0.12 each, 0.24 (0.25 exact)
    job = JobFactory(cluster=world.cluster, team=world.nlp, start=T0 + 3 * HOUR, first_day=DAY1, last_day=DAY1)
    JobGpuHourFactory(job=job, gpu=world.gpus[1], hour=T0 + 3 * HOUR, cost=Decimal("0.125"))
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY1])
    # when finance compares the teams
    compared = teams_compared(user=world.finance, start=START, end=END)
    # then each team's cost is the sum its rollup books, in minor units, the exact cost beside it
    for row in compared:
        team = world.vision if row["team"] == "vision" else world.nlp
        booked = team_job_costs_minor(team=team, start=START, end=END, granularity="day", currency="EUR")
        assert Decimal(row["cost"]) == sum(booked.values())
    vision = compared[1]
    assert (vision["cost"], vision["cost_exact"], vision["cost_minor"]) == ("2.33", "2.333331", 233)
    assert (compared[0]["cost"], compared[0]["cost_exact"], compared[0]["cost_minor"]) == ("0.24", "0.250000", 24)
    # kWh beside J; the days summed, the end exclusive
    assert vision["energy_kwh"] == pytest.approx(vision["energy_j"] / J_PER_KWH)
    assert (vision["period_start"], vision["period_end"]) == ("2026-11-02", "2026-11-04")
    # the old columns first, finance's after them (the CSV's order)
    assert list(vision) == [
        "team", "gpu_hours", "energy_j", "facility_kwh", "operational_kg", "embodied_kg", "cost", "energy_kwh",
        "cost_exact", "display_name", "currency", "period_start", "period_end", "cost_minor",
    ]  # fmt: skip


def test_a_period_inside_a_day_is_compared_over_the_whole_utc_days_it_touches(world: DayWorld) -> None:
    inside = teams_compared(user=world.member, start=START + timedelta(hours=5), end=START + timedelta(hours=6))
    assert [(r["team"], r["cost"], r["period_start"], r["period_end"]) for r in inside] == [
        ("vision", "1.67", "2026-11-02", "2026-11-03")
    ]


def test_each_teams_energy_per_day_and_method_is_its_daily_sums(world: DayWorld) -> None:
    # when finance and vision's member read the teams' daily energy
    everyone = team_daily_energy(user=world.finance, start=START, end=END)
    mine = team_daily_energy(user=world.member, start=START, end=END)
    # then one line per day, team and method, of the billed jobs, kWh beside J
    assert [(r["day"], r["team"], r["method"]) for r in everyone] == [
        (DAY1.isoformat(), "nlp", "whole_gpu"),
        (DAY1.isoformat(), "vision", "whole_gpu"),
        (DAY2.isoformat(), "vision", "whole_gpu"),
    ]
    assert [r["energy_j"] for r in everyone] == pytest.approx([ROW_J, 5 * ROW_J, 2 * ROW_J])
    assert all(r["energy_kwh"] == pytest.approx(r["energy_j"] / J_PER_KWH) for r in everyone)
    # and a member sees their team's only
    assert mine == [r for r in everyone if r["team"] == "vision"]
