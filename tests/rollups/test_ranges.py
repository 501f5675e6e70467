"""A rollup's range and its periods (apps/rollups/ranges.py): the period a UTC day is in is the one TRUNC gives its
hours in the database; whole UTC days are what the daily sums answer, and a range over a day past retention is not;
a day past retention counts only where the range holds it whole; a team's bill leaves out its excluded jobs."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.db.models import Q

from apps.jobs.models import ExpiredJobDay, JobGpuHour
from apps.rollups.models import ClusterDay, JobGroupDay
from apps.rollups.ranges import (
    TRUNC,
    cluster_day_sums,
    day_after,
    expired_days,
    group_day_sums,
    period_key,
    period_of,
    team_billed,
    whole_days,
)
from tests.factories import GpuFactory, JobFactory, JobGpuHourFactory, TeamFactory
from tests.rollups.day_world import DAY1, DAY2, END, START, T0, DayWorld, day_world_build

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("day", "granularity", "period"),
    [
        (date(2026, 11, 5), "day", "2026-11-05"),
        (date(2026, 11, 5), "week", "2026-11-02"),  # a Thursday: its week's Monday
        (date(2026, 11, 8), "week", "2026-11-02"),  # a Sunday: still the Monday before
        (date(2026, 11, 9), "week", "2026-11-09"),  # a Monday is its own week's
        (date(2027, 1, 1), "week", "2026-12-28"),  # across a year's end
        (date(2026, 11, 30), "month", "2026-11-01"),
        (date(2026, 12, 1), "month", "2026-12-01"),
    ],
)
def test_a_day_is_in_the_period_of_its_day_week_or_month(day: date, granularity: str, period: str) -> None:
    assert period_of(day, granularity) == period


@pytest.mark.django_db
@pytest.mark.parametrize("granularity", sorted(TRUNC))
def test_period_of_a_day_is_the_period_trunc_gives_its_hours_in_the_database(granularity: str) -> None:
    # given rows on the days around a week's and a month's end, at the first and last hour of each
    job = JobFactory()
    gpu = GpuFactory(node__cluster=job.cluster)
    hours = [datetime(2026, 11, 27, tzinfo=UTC) + timedelta(days=d, hours=h) for d in range(7) for h in (0, 23)]
    for hour in hours:
        JobGpuHourFactory(job=job, gpu=gpu, hour=hour)
    # when Postgres truncates them as the rollups read their rows
    found = JobGpuHour.objects.annotate(period=TRUNC[granularity]("hour")).values_list("hour", "period")
    # then each row's period is its UTC day's period_of, and period_key names it
    assert len(found) == len(hours)
    for hour, period in found:
        assert period_key(period) == period_of(hour.astimezone(UTC).date(), granularity)


def test_a_periods_key_is_its_utc_days_iso_date() -> None:
    assert period_key(datetime(2026, 11, 2, tzinfo=UTC)) == "2026-11-02"
    assert period_key(date(2026, 11, 2)) == "2026-11-02"


def test_whole_days_are_a_range_from_midnight_to_midnight_utc() -> None:
    # midnights UTC, however the moments are written
    assert whole_days(START, END) == (DAY1, date(2026, 11, 4))
    assert whole_days(datetime(2026, 11, 2, 1, tzinfo=BERLIN), END) == (DAY1, date(2026, 11, 4))
    # anything else is not: an hour into the day, or a midnight in Berlin (23:00 UTC)
    assert whole_days(START + timedelta(hours=1), END) is None
    assert whole_days(START, END - timedelta(seconds=1)) is None
    assert whole_days(datetime(2026, 11, 2, tzinfo=BERLIN), datetime(2026, 11, 4, tzinfo=BERLIN)) is None


def test_the_day_after_a_range_is_its_ends_day_at_midnight_and_the_next_one_otherwise() -> None:
    assert day_after(datetime(2026, 11, 4, tzinfo=UTC)) == date(2026, 11, 4)
    assert day_after(datetime(2026, 11, 4, 0, 0, 1, tzinfo=UTC)) == date(2026, 11, 5)
    assert day_after(datetime(2026, 11, 4, 23, 59, tzinfo=UTC)) == date(2026, 11, 5)
    # Berlin's midnight of the 4th is 23:00 UTC on the 3rd: the 3rd is in the range, the 4th (UTC) is after it
    assert day_after(datetime(2026, 11, 4, tzinfo=BERLIN)) == date(2026, 11, 4)


@pytest.mark.django_db
def test_a_teams_bill_is_its_jobs_rows_less_those_an_admin_excluded() -> None:
    # given a team's billed job, its excluded job, and another team's job, a row each
    team = TeamFactory()
    billed, excluded = JobFactory(team=team), JobFactory(team=team, excluded_from_bill=True)
    other = JobFactory()
    for job in (billed, excluded, other):
        JobGpuHourFactory(job=job)
    # when the rows are filtered to the team's bill
    found = set(JobGpuHour.objects.filter(team_billed(team)).values_list("job_id", flat=True))
    # then only the billed job's
    assert found == {billed.pk}


@pytest.mark.django_db
def test_a_day_past_retention_counts_only_where_the_range_holds_it_whole() -> None:
    # given a job's three days past retention
    job = JobFactory()
    for day in (date(2026, 10, 1), date(2026, 10, 2), date(2026, 10, 3)):
        ExpiredJobDay.objects.create(job=job, cluster=job.cluster, day=day, cost=Decimal("1.00"))

    def days(start: datetime, end: datetime) -> list[date]:
        return sorted(expired_days(Q(job=job), start, end).values_list("day", flat=True))

    # then a range of whole days holds them all, one cut at either end leaves the cut days out
    first = datetime(2026, 10, 1, tzinfo=UTC)
    assert days(first, first + timedelta(days=3)) == [date(2026, 10, 1), date(2026, 10, 2), date(2026, 10, 3)]
    assert days(first + timedelta(hours=1), first + timedelta(days=3)) == [date(2026, 10, 2), date(2026, 10, 3)]
    assert days(first, first + timedelta(days=2, hours=23)) == [date(2026, 10, 1), date(2026, 10, 2)]
    assert days(first + timedelta(hours=6), first + timedelta(hours=18)) == []
    # and another job's filter finds none of them
    assert not expired_days(Q(job=JobFactory()), first, first + timedelta(days=3)).exists()


@pytest.fixture
def world(db: None) -> DayWorld:
    return day_world_build()


def test_the_daily_sums_answer_whole_days_of_the_cluster_or_group_only(world: DayWorld) -> None:
    # when whole UTC days are asked for
    cluster_days = cluster_day_sums(world.cluster, START, END)
    group_days = group_day_sums(world.group, START, END)
    # then the daily sums of that cluster and group, those days only
    assert cluster_days is not None and group_days is not None
    assert sorted(cluster_days.values_list("day", flat=True)) == [DAY1, DAY2]
    assert set(cluster_days) == set(ClusterDay.objects.filter(cluster=world.cluster))
    assert sorted(group_days.values_list("day", flat=True)) == [DAY1]  # its jobs ran on the first day only
    assert set(group_days) == set(JobGroupDay.objects.filter(job_group=world.group))
    assert sorted(cluster_day_sums(world.cluster, START, START + timedelta(days=1)).values_list("day", flat=True)) == [
        DAY1
    ]
    # and a range cut inside a day is the rows' to answer
    assert cluster_day_sums(world.cluster, START, END - timedelta(hours=1)) is None
    assert group_day_sums(world.group, START + timedelta(hours=1), END) is None


def test_a_range_over_a_day_past_retention_is_not_the_daily_sums_to_answer(world: DayWorld) -> None:
    # given a job of the group whose day before the world's rows were dropped past retention
    job = world.jobs["v-within"]
    ExpiredJobDay.objects.create(job=job, cluster=world.cluster, day=date(2026, 11, 1), cost=Decimal("2.00"))
    # then a range over that day reads the rows (what is left of them), one after it the daily sums
    before = T0 - timedelta(days=1)
    assert cluster_day_sums(world.cluster, before, END) is None
    assert group_day_sums(world.group, before, END) is None
    assert cluster_day_sums(world.cluster, START, END) is not None
    assert group_day_sums(world.group, START, END) is not None
