"""Money as finance tools book it (apps/rollups/cost_selectors.py): each job's cost rounded half-even on its own, a
period the sum of its jobs' rounded costs, a job across periods split so its parts add up to its rounded cost; the
same from the daily sums as from the rows, a day past retention counted with its job, the teams' sums of the teams the
user may see only."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser

from apps.core.units.money import round_minor
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour
from apps.rollups.cost_selectors import (
    cluster_job_costs_minor,
    job_group_job_costs_minor,
    team_job_costs_minor,
    team_totals_costs_minor,
)
from apps.rollups.models import TeamDay
from apps.rollups.services import day_sums_refresh
from tests.factories import JobFactory
from tests.rollups.day_world import DAY1, DAY2, END, START, T0, DayWorld, day_world_build

pytestmark = pytest.mark.django_db

FROM_ROWS = END - timedelta(seconds=1)  # not a midnight: the same hours, read from the rows
D = Decimal


@pytest.fixture
def world() -> DayWorld:
    return day_world_build()


def _nonzero(costs: dict[str, Decimal]) -> dict[str, Decimal]:
    return {k: v for k, v in costs.items() if v}


def test_a_period_is_the_sum_of_its_jobs_rounded_costs_and_a_job_across_two_is_split(world: DayWorld) -> None:
    # when vision's two days are booked
    costs = team_job_costs_minor(team=world.vision, start=START, end=END, granularity="day", currency="EUR")
    # then day 1 holds its job within it (0.999999: 1.00) and the first part of the job across midnight, whose
    # 1.333332 rounds to 1.33, split 0.67 + 0.66 (not 0.67 + 0.67, each day's two thirds rounded on its own)
    assert costs == {"2026-11-02": D("1.67"), "2026-11-03": D("0.66")}
    # which is not the days' exact sums rounded (1.666665 and 0.666666: 1.67 + 0.67)
    days = TeamDay.objects.filter(team=world.vision).order_by("day").values_list("cost", flat=True)
    assert [round_minor(cost, "EUR") for cost in days] == [D("1.67"), D("0.67")]
    # a week holds both days' parts
    week = team_job_costs_minor(team=world.vision, start=START, end=END, granularity="week", currency="EUR")
    assert week == {"2026-11-02": D("2.33")}


@pytest.mark.parametrize("granularity", ["day", "week", "month"])
def test_every_rollups_costs_are_the_sum_of_its_jobs_rounded_costs_from_the_days_as_from_the_rows(
    world: DayWorld, granularity: str
) -> None:
    subjects = [
        (team_job_costs_minor, {"team": world.vision}, Job.objects.filter(team=world.vision, excluded_from_bill=False)),
        (team_job_costs_minor, {"team": world.nlp}, Job.objects.filter(team=world.nlp)),
        (cluster_job_costs_minor, {"cluster": world.cluster}, Job.objects.filter(cluster=world.cluster)),
        (job_group_job_costs_minor, {"group": world.group}, Job.objects.filter(job_group=world.group)),
    ]
    for costs_minor, subject, jobs in subjects:
        # when its whole days are booked, and the same hours from the rows
        from_days = costs_minor(**subject, start=START, end=END, granularity=granularity, currency="EUR")
        from_rows = costs_minor(**subject, start=START, end=FROM_ROWS, granularity=granularity, currency="EUR")
        # then the same, and in all the sum of its jobs' costs each rounded on its own
        assert _nonzero(from_days) == _nonzero(from_rows), costs_minor.__name__
        assert sum(from_days.values()) == sum(round_minor(job.cost, "EUR") for job in jobs), costs_minor.__name__


def test_the_excluded_job_is_on_the_clusters_costs_and_not_on_its_teams(world: DayWorld) -> None:
    cluster = cluster_job_costs_minor(cluster=world.cluster, start=START, end=END, granularity="day", currency="EUR")
    group = job_group_job_costs_minor(group=world.group, start=START, end=END, granularity="day", currency="EUR")
    # day 1: 1.00 (vision's within) + 0.67 (its part across) + 1.00 (excluded) + 0.12 (nlp's 0.125, half to even)
    assert cluster == {"2026-11-02": D("2.79"), "2026-11-03": D("0.66")}
    assert group == {"2026-11-02": D("1.12")}


def test_a_day_whose_jobs_days_are_not_recorded_is_read_from_the_rows_to_the_same_costs(world: DayWorld) -> None:
    # given the job within day 1 stored before its days were recorded
    Job.objects.filter(pk=world.jobs["v-within"].pk).update(first_day=None, last_day=None)
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY1, DAY2])
    assert TeamDay.objects.get(team=world.vision, day=DAY1).cost_units is None
    # then vision's days still book each job rounded on its own
    costs = team_job_costs_minor(team=world.vision, start=START, end=END, granularity="day", currency="EUR")
    assert costs == {"2026-11-02": D("1.67"), "2026-11-03": D("0.66")}


def test_another_minor_unit_reads_the_rows_and_rounds_in_it(world: DayWorld) -> None:
    # when vision's days are booked in yen (no minor unit; the daily sums hold cents)
    costs = team_job_costs_minor(team=world.vision, start=START, end=END, granularity="day", currency="JPY")
    # then each job is rounded to the yen: 1 for the job within day 1, 1 for the one across (its two equal halves:
    # the unit to the first day)
    assert _nonzero(costs) == {"2026-11-02": D("2")}


def test_a_day_past_retention_is_counted_with_its_jobs_cost(world: DayWorld) -> None:
    # given a job whose only day is past retention (0.505: 0.50, half to even), and the job within day 1 with a day
    # before it past retention too
    old = JobFactory(cluster=world.cluster, team=world.nlp, start=T0 - timedelta(days=1), first_day=None)
    ExpiredJobDay.objects.create(job=old, cluster=world.cluster, day=date(2026, 11, 1), cost=D("0.505"))
    within = world.jobs["v-within"]
    ExpiredJobDay.objects.create(job=within, cluster=world.cluster, day=date(2026, 11, 1), cost=D("0.004"))
    # when the cluster's three days are booked (over a day past retention: from the rows and those days)
    costs = cluster_job_costs_minor(
        cluster=world.cluster, start=START - timedelta(days=1), end=END, granularity="day", currency="EUR"
    )
    # then the old job's day is its rounded cost, and every job's parts add up to its whole cost rounded
    assert costs["2026-11-01"] == D("0.50")
    whole: dict[int, Decimal] = defaultdict(Decimal)
    for job_id, cost in JobGpuHour.objects.values_list("job_id", "cost"):
        whole[job_id] += cost
    for job_id, cost in ExpiredJobDay.objects.values_list("job_id", "cost"):
        whole[job_id] += cost
    assert sum(costs.values()) == sum(round_minor(c, "EUR") for c in whole.values())


def test_the_teams_sums_are_of_the_teams_the_user_may_see(world: DayWorld) -> None:
    # finance sees every team, a member their own, nobody logged in none
    assert team_totals_costs_minor(user=world.finance, start=START, end=END) == {
        "vision": D("2.33"),
        "nlp": D("0.12"),
    }
    assert team_totals_costs_minor(user=world.member, start=START, end=END) == {"vision": D("2.33")}
    assert team_totals_costs_minor(user=AnonymousUser(), start=START, end=END) == {}
    # and a period inside a day counts the whole UTC days it touches, as the teams' rollups
    assert team_totals_costs_minor(user=world.member, start=START + timedelta(hours=5), end=START + timedelta(hours=6))[
        "vision"
    ] == D("1.67")


def test_the_teams_sums_read_every_job_from_the_rows_where_a_days_sum_is_not_known(world: DayWorld) -> None:
    # given nlp's job stored before its days were recorded
    Job.objects.filter(pk=world.jobs["n-within"].pk).update(first_day=None, last_day=None)
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY1, DAY2])
    # then the sums are the same
    assert team_totals_costs_minor(user=world.finance, start=START, end=END) == {
        "vision": D("2.33"),
        "nlp": D("0.12"),
    }
