"""The sums of rounded job costs (finance's money, docs/api.md) read the jobs within one UTC day from the teams'
daily sums (TeamDay.cost_units) and only the jobs across days from their rows: the same figures as every job read
from its rows, whichever way a day's jobs came to be (a job running past midnight, an ingest hour by hour or
fanned out, a job whose days are not recorded, two currencies on one day, the release's own migration)."""

from __future__ import annotations

import importlib
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.db import connection

from apps.core.units.money import split_rounded
from apps.fleet.models import Team, TeamRule
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour
from apps.pipeline.fanout import hours_derive
from apps.pipeline.ingest import Fetched, hour_write
from apps.rollups.cost_selectors import team_job_costs_minor, team_totals_costs_minor
from apps.rollups.models import TeamDay
from apps.rollups.services import day_sums_refresh
from apps.telemetry import services as telemetry
from tests.carbon.fleet_builder import fleet_build
from tests.pipeline.test_ingest_team_moves import LAST_HOUR_OF_A_DAY, _hour_of_one_job
from tests.rollups.outcomes_world import OutcomesWorld, outcomes_world_build

pytestmark = pytest.mark.django_db

GRANULARITIES = ("day", "week", "month")


def _period(hour: datetime, granularity: str) -> str:
    day = hour.astimezone(UTC).date()
    if granularity == "week":
        day -= timedelta(days=day.weekday())
    elif granularity == "month":
        day = day.replace(day=1)
    return day.isoformat()


def _every_job_from_its_rows(
    team: Team, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """The oracle, in Python: each billed job's cost per period from its rows, split so that its parts add up
    to its rounded cost (apps.core.units.money), added up per period."""
    parts: dict[int, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in JobGpuHour.objects.filter(job__team=team, job__excluded_from_bill=False, hour__gte=start,
                                         hour__lt=end):  # fmt: skip
        parts[row.job_id][_period(row.hour, granularity)] += row.cost
    out: dict[str, Decimal] = defaultdict(Decimal)
    for job_parts in parts.values():
        for period, amount in split_rounded(dict(job_parts), currency).items():
            out[period] += amount
    return {period: amount for period, amount in out.items() if amount}


def _booked(team: Team, start: datetime, end: datetime, granularity: str, currency: str) -> dict[str, Decimal]:
    booked = team_job_costs_minor(team=team, start=start, end=end, granularity=granularity, currency=currency)
    return {period: amount for period, amount in booked.items() if amount}


@pytest.mark.parametrize("derive_now", [True, False], ids=["hour-by-hour", "fanned-out"])
def test_a_job_running_past_midnight_leaves_its_first_day_s_sum_and_is_read_from_its_rows(derive_now: bool) -> None:
    # given a job ingested for the last hour of a day: within that day, so its rounded cost is in the day's sum
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu, team = fleet.gpus[0], Team.objects.create(name="t-vision")
    TeamRule.objects.create(cluster=fleet.cluster, kind=TeamRule.Kind.SLURM_ACCOUNT, value="acct", team=team)
    first, second = LAST_HOUR_OF_A_DAY, LAST_HOUR_OF_A_DAY + timedelta(hours=1)
    hour_write(cluster=fleet.cluster, hour=first,
               fetched=Fetched(_hour_of_one_job(first, gpu.uuid, gpu.node.hostname, 1.23e6), None, 0, 0.0))  # fmt: skip
    job = Job.objects.get()
    assert (job.first_day, job.last_day, job.across_days) == (first.date(), first.date(), False)
    day = TeamDay.objects.get(team=team, day=first.date())
    assert day.cost_units == round(job.cost * 100) > 0 and day.units_exponent == 2
    start, end = datetime.combine(first.date(), datetime.min.time(), UTC), first + timedelta(days=2)
    assert _booked(team, start, end, "day", "EUR") == _every_job_from_its_rows(team, start, end, "day", "EUR")
    # when its next hour, the next day's first, is ingested
    hour_write(
        cluster=fleet.cluster,
        hour=second,
        fetched=Fetched(_hour_of_one_job(second, gpu.uuid, gpu.node.hostname, 2.5e6), None, 0, 0.0),
        derive_now=derive_now,
    )
    if not derive_now:  # the fan-out: the batch's one derivation follows its parts
        telemetry.cluster_write_lock(cluster=fleet.cluster)
        hours_derive(cluster=fleet.cluster, start=second, end=second + timedelta(hours=1))
    # then the job is across days, neither day holds its cost, and its cost is split over them from its rows
    job.refresh_from_db()
    assert (job.first_day, job.last_day, job.across_days) == (first.date(), second.date(), True)
    units = dict(TeamDay.objects.filter(team=team).values_list("day", "cost_units"))
    assert units == {first.date(): 0, second.date(): 0}
    for granularity in GRANULARITIES:
        expected = _every_job_from_its_rows(team, start, end, granularity, "EUR")
        assert _booked(team, start, end, granularity, "EUR") == expected, granularity
    assert sum(expected.values()) == round(job.cost, 2)
    admin = User.objects.create_user("root", password="pw-root", is_staff=True)
    compared = team_totals_costs_minor(user=admin, start=start, end=end)
    assert compared == {"t-vision": round(job.cost, 2)}


@pytest.fixture
def world() -> OutcomesWorld:
    """The outcomes world, its running job on into the next day (two more hours, as its next ingests leave it)."""
    world = outcomes_world_build()
    job = world.jobs["slurm/15"]
    row = JobGpuHour.objects.filter(job=job).order_by("-hour").first()
    assert row is not None and row.hour.date() == date(2026, 11, 2)
    for hour in (datetime(2026, 11, 3, 0, tzinfo=UTC), datetime(2026, 11, 3, 1, tzinfo=UTC)):
        row.pk, row.hour = None, hour
        row.save()
    Job.objects.filter(pk=job.pk).update(first_day=date(2026, 11, 2), last_day=date(2026, 11, 3))
    return world


def _days_refresh(world: OutcomesWorld) -> None:
    day_sums_refresh(cluster_ids=[world.fleet.cluster.pk], days=[date(2026, 11, 2), date(2026, 11, 3)])


START, END = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC)


def _costs_set(world: OutcomesWorld, amounts: list[str]) -> None:
    """Costs with halves of a cent to round, one per row, as a footprint refresh would leave them."""
    for n, row in enumerate(JobGpuHour.objects.filter(job__team=world.vision).order_by("pk")):
        JobGpuHour.objects.filter(pk=row.pk).update(cost=Decimal(amounts[n % len(amounts)]))
    for job in Job.objects.filter(team=world.vision):
        job.cost = sum((r.cost for r in JobGpuHour.objects.filter(job=job)), Decimal(0))
        job.save(update_fields=["cost"])
    _days_refresh(world)


def test_a_team_s_jobs_within_a_day_and_across_days_sum_as_every_job_from_its_rows(world: OutcomesWorld) -> None:
    # given vision's jobs, one of them running past midnight, with costs that round either way
    _costs_set(world, ["0.005", "0.015", "1.125", "0.333333", "2.5"])
    across = Job.objects.filter(team=world.vision, across_days=True)
    assert across.exists() and Job.objects.filter(team=world.vision, across_days=False).exists()
    assert TeamDay.objects.filter(team=world.vision, cost_units__gt=0).exists()
    # when finance books the team per day, week and month, and the teams side by side
    for granularity in GRANULARITIES:
        # then each is every job read from its rows, each rounded and split
        expected = _every_job_from_its_rows(world.vision, START, END, granularity, "EUR")
        assert _booked(world.vision, START, END, granularity, "EUR") == expected, granularity
    compared = team_totals_costs_minor(user=world.finance, start=START, end=END)
    for team in (world.vision, world.nlp):
        assert compared[team.name] == sum(_every_job_from_its_rows(team, START, END, "month", "EUR").values())


def test_a_day_with_a_job_whose_days_are_not_recorded_is_read_from_the_rows(world: OutcomesWorld) -> None:
    # given a job on the day with no days recorded (written by an earlier release)
    _costs_set(world, ["0.005", "0.015", "1.125"])
    job = Job.objects.filter(team=world.vision, across_days=False, excluded_from_bill=False).order_by("pk").first()
    assert job is not None
    Job.objects.filter(pk=job.pk).update(first_day=None, last_day=None)
    _days_refresh(world)
    # then the day's sum is not known, and the team's money is every job from its rows
    assert TeamDay.objects.get(team=world.vision, day=date(2026, 11, 2)).cost_units is None
    for granularity in GRANULARITIES:
        expected = _every_job_from_its_rows(world.vision, START, END, granularity, "EUR")
        assert _booked(world.vision, START, END, granularity, "EUR") == expected, granularity


def test_a_day_of_jobs_in_two_currencies_is_read_from_the_rows(world: OutcomesWorld) -> None:
    # given a day whose jobs within it are booked in euros and in yen
    _costs_set(world, ["1.5", "2.5", "0.125"])
    job = Job.objects.filter(team=world.vision, across_days=False, excluded_from_bill=False).order_by("pk").first()
    assert job is not None
    Job.objects.filter(pk=job.pk).update(currency="JPY")
    _days_refresh(world)
    assert TeamDay.objects.get(team=world.vision, day=date(2026, 11, 2)).units_exponent == -1
    # then the team's rollup rounds every job in its own currency's unit (euros), and the side by side each job
    # in its own
    for granularity in GRANULARITIES:
        expected = _every_job_from_its_rows(world.vision, START, END, granularity, "EUR")
        assert _booked(world.vision, START, END, granularity, "EUR") == expected, granularity
    compared = team_totals_costs_minor(user=world.finance, start=START, end=END)
    yen = Job.objects.get(pk=job.pk).cost
    others = _every_job_from_its_rows(world.vision, START, END, "month", "EUR")
    assert compared["vision"] == sum(others.values()) - yen.quantize(Decimal("0.01")) + yen.quantize(Decimal(1))


def test_a_rollup_in_another_currency_s_unit_reads_the_rows(world: OutcomesWorld) -> None:
    # given sums of euro jobs in cents
    _costs_set(world, ["0.4", "0.6", "1.5"])
    # when a rollup is booked in yen (no decimals): then each job is rounded to the yen, not the cent
    for granularity in GRANULARITIES:
        expected = _every_job_from_its_rows(world.vision, START, END, granularity, "JPY")
        assert _booked(world.vision, START, END, granularity, "JPY") == expected, granularity


def test_a_job_s_days_past_retention_count_as_its_days(world: OutcomesWorld) -> None:
    # given a job across days whose first day's hour rows were dropped past retention (kept as its day's cost)
    _costs_set(world, ["0.005", "0.015", "1.125", "0.333333"])
    job = Job.objects.filter(team=world.vision, across_days=True).get()
    expected = _every_job_from_its_rows(world.vision, START, END, "day", "EUR")
    first = JobGpuHour.objects.filter(job=job, hour__lt=datetime(2026, 11, 3, tzinfo=UTC))
    ExpiredJobDay.objects.create(job=job, cluster=world.fleet.cluster, day=date(2026, 11, 2),
                                 cost=sum((r.cost for r in first), Decimal(0)))  # fmt: skip
    first.delete()
    # then the team's days still add up to the same: the expired day is read with the job's rows
    assert _booked(world.vision, START, END, "day", "EUR") == expected


def _migration(name: str) -> object:
    return importlib.import_module(f"apps.{name}")


def test_the_release_s_migration_fills_the_days_and_sums_the_derivation_writes(world: OutcomesWorld) -> None:
    # given the jobs' days and the teams' sums as the derivation writes them
    _costs_set(world, ["0.005", "0.015", "1.125", "0.333333", "2.5"])
    days = {j.pk: (j.first_day, j.last_day) for j in Job.objects.all()}
    sums = set(TeamDay.objects.values_list("team_id", "cluster_id", "day", "cost_units", "units_exponent"))
    assert any(units for *_, units, _ in sums)
    # when they are emptied, as before the release, and its migrations fill them
    Job.objects.update(first_day=None, last_day=None)
    TeamDay.objects.update(cost_units=None, units_exponent=None)
    with connection.cursor() as cursor:
        cursor.execute(_migration("jobs.migrations.0013_job_days").DAYS_FILL)  # type: ignore[attr-defined]
    fill = _migration("rollups.migrations.0003_team_day_cost_units").units_fill  # type: ignore[attr-defined]
    fill(None, SimpleNamespace(connection=connection))
    # then they are the same
    assert {j.pk: (j.first_day, j.last_day) for j in Job.objects.all()} == days
    assert set(TeamDay.objects.values_list("team_id", "cluster_id", "day", "cost_units", "units_exponent")) == sums
