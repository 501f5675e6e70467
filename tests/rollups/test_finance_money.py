"""Rollups for finance tools: money in the currency's minor unit, totals that are the exact sum of the rounded
rows they stand for (a team's job rows add up to its rollup to the cent), kWh beside J, CSV with the team,
period, currency and a totals row, and the `month=` / `week=` shortcuts (docs/api.md)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from rest_framework.test import APIClient

from apps.core.units.money import round_minor
from apps.jobs.models import Job, JobGpuHour
from apps.rollups.cost_selectors import team_job_costs_minor, team_totals_costs_minor
from apps.rollups.services import day_sums_refresh
from tests.carbon.fleet_builder import T0
from tests.rollups.outcomes_world import PERIOD, OutcomesWorld, outcomes_world_build

pytestmark = pytest.mark.django_db

CENT = Decimal("0.01")


@pytest.fixture
def world() -> OutcomesWorld:
    w = outcomes_world_build()
    # Every job-GPU-hour costs a third of a unit: each job's exact cost has a remainder under the cent, so
    # the rounded jobs add up to less than the rounded sum (7 jobs of vision: the remainders pile up).
    JobGpuHour.objects.update(cost=Decimal("0.333333"))
    for job in Job.objects.all():
        job.cost = sum((r.cost for r in JobGpuHour.objects.filter(job=job)), Decimal(0))
        job.save(update_fields=["cost"])
    day_sums_refresh(cluster_ids=[w.fleet.cluster.pk], days=[date(2026, 11, 2), date(2026, 11, 3)])
    return w


def _client(world: OutcomesWorld) -> APIClient:
    client = APIClient()
    client.force_authenticate(world.finance)
    return client


def _all_jobs(client: APIClient, team: str) -> list[dict]:
    jobs, url, params = [], "/api/jobs/", {"team": team, "page_size": 2}
    while url:
        page = client.get(url, params).json()
        jobs += page["results"]
        url, params = page["next"], {}
    return jobs


def test_a_teams_job_rows_add_up_to_its_rollup_to_the_cent(world: OutcomesWorld) -> None:
    # given finance's client
    client = _client(world)
    # when it reads vision's jobs (every page) and vision's rollup per day
    jobs = _all_jobs(client, "vision")
    rollup = client.get(f"/api/teams/{world.vision.pk}/rollup/", {**PERIOD, "granularity": "day"}).json()
    # then each job's cost is in cents, and the rollup's total is their sum to the cent
    assert len(jobs) == 7 and all(Decimal(j["cost"]) == Decimal(j["cost"]).quantize(CENT) for j in jobs)
    assert all(Decimal(j["cost_exact"]) == Job.objects.get(pk=j["id"]).cost for j in jobs)
    jobs_total = sum((Decimal(j["cost"]) for j in jobs), Decimal(0))
    periods = rollup["periods"]
    assert Decimal(rollup["totals"]["cost"]) == jobs_total
    assert sum((Decimal(p["cost"]) for p in periods), Decimal(0)) == jobs_total
    # the remainder against the unrounded sum stays in `cost_exact`
    exact = sum((Decimal(p["cost_exact"]) for p in periods), Decimal(0))
    stored = sum((Job.objects.get(pk=j["id"]).cost for j in jobs), Decimal(0))
    assert Decimal(rollup["totals"]["cost_exact"]) == exact == stored
    assert exact.quantize(CENT, rounding=ROUND_HALF_EVEN) != jobs_total  # the case the rule is for
    # and energy is in kWh beside J
    assert rollup["totals"]["energy_kwh"] == pytest.approx(rollup["totals"]["energy_j"] / 3.6e6)
    assert all(p["energy_kwh"] == pytest.approx(p["energy_j"] / 3.6e6) for p in periods)
    assert all(j["energy_kwh"] == pytest.approx(j["energy_j"] / 3.6e6) for j in jobs)


def test_a_job_across_two_periods_is_split_so_its_parts_add_up_to_its_rounded_cost(world: OutcomesWorld) -> None:
    # given a vision job that runs across midnight (hours 22 to 26 of the first day)
    job = world.jobs["slurm/15"]
    JobGpuHour.objects.filter(job=job).delete()
    first = JobGpuHour.objects.filter(job=world.jobs["slurm/11"]).first()
    assert first is not None
    for n in range(4):
        first.pk, first.job, first.hour = None, job, T0 + timedelta(hours=22 + n)
        first.cost = Decimal("0.333333")
        first.save()
    job.cost = Decimal("1.333332")
    job.first_day, job.last_day = date(2026, 11, 2), date(2026, 11, 3)  # as the derivation's summaries record
    job.save(update_fields=["cost", "first_day", "last_day"])
    day_sums_refresh(cluster_ids=[world.fleet.cluster.pk], days=[date(2026, 11, 2), date(2026, 11, 3)])
    client = _client(world)
    # when finance reads the rollup per day
    rollup = client.get(f"/api/teams/{world.vision.pk}/rollup/", {**PERIOD, "granularity": "day"}).json()
    jobs = _all_jobs(client, "vision")
    # then the days add up to the jobs' rounded costs: the job's 1.33 is split 0.67 + 0.66 (two thirds each
    # day, the unit left over to the first day), not rounded per day to 0.67 + 0.67
    assert [p["period"] for p in rollup["periods"]] == ["2026-11-02", "2026-11-03"]
    assert rollup["periods"][1]["cost"] == "0.66"
    assert Decimal(rollup["totals"]["cost"]) == sum((Decimal(j["cost"]) for j in jobs), Decimal(0))


# Exact halves of the minor unit (each way to round), negatives (credits), and sub-unit amounts.
AWKWARD = ["0.005", "0.015", "-0.025", "-0.035", "2.5", "3.5", "0.0005", "0.0015", "-1.5", "7.499999", "0.000001"]


@pytest.mark.parametrize("currency", ["EUR", "JPY", "KWD"])
def test_jobs_within_one_period_are_rounded_half_even_in_the_database_as_round_minor_rounds(
    world: OutcomesWorld, currency: str
) -> None:
    # given vision's jobs within one month, one of them with one costed row, the others free
    JobGpuHour.objects.filter(job__team=world.vision).update(cost=Decimal(0))
    row = JobGpuHour.objects.filter(job__team=world.vision, job__excluded_from_bill=False).order_by("pk").first()
    month = {"start": datetime(2026, 11, 2, tzinfo=UTC), "end": datetime(2026, 11, 4, tzinfo=UTC)}
    for amount in AWKWARD:
        JobGpuHour.objects.filter(pk=row.pk).update(cost=Decimal(amount))
        day_sums_refresh(cluster_ids=[world.fleet.cluster.pk], days=[date(2026, 11, 2), date(2026, 11, 3)])
        # when the team's month is booked in minor units (a job within one period: rounded in Postgres, in the
        # team's daily sums for EUR, the sites' currency, and from the rows for the others)
        booked = team_job_costs_minor(team=world.vision, **month, granularity="month", currency=currency)
        # then it is the job rounded half-even as apps.core.units.money rounds it, with the currency's places
        expected = round_minor(Decimal(amount), currency)
        assert str(booked["2026-11-01"]) == str(expected), amount


def test_rollup_csv_names_team_period_currency_and_ends_with_totals(world: OutcomesWorld) -> None:
    # given finance's client
    client = _client(world)
    url = f"/api/teams/{world.vision.pk}/rollup/"
    # when it reads the rollup as CSV (its totals row is there by default), and as JSON
    response = client.get(url, {**PERIOD, "format": "csv"})
    doc = client.get(url, PERIOD).json()
    plain = client.get(url, {**PERIOD, "format": "csv", "totals": "false"})
    # then every row names the team, period and currency, and the last one is the total of the others
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["period"] for r in rows] == ["2026-11-02", "total"]
    assert {(r["team"], r["currency"]) for r in rows} == {("vision", "EUR")}
    assert Decimal(rows[-1]["cost"]) == sum((Decimal(r["cost"]) for r in rows[:-1]), Decimal(0))
    assert rows[-1]["cost"] == doc["totals"]["cost"]
    assert float(rows[-1]["energy_kwh"]) == pytest.approx(doc["totals"]["energy_kwh"])
    # with ?totals=false, the rows are the periods only
    assert len(plain.content.decode().splitlines()) == 2


@pytest.mark.parametrize(
    ("shortcut", "start", "end"),
    [({"month": "2026-11"}, "2026-11-01", "2026-12-01"), ({"week": "2026-W45"}, "2026-11-02", "2026-11-09")],
)
def test_month_and_week_shortcuts_are_their_ranges(world: OutcomesWorld, shortcut, start, end) -> None:
    # given finance's client
    client = _client(world)
    url = f"/api/teams/{world.vision.pk}/rollup/"
    # when it asks with the shortcut and with the range it stands for
    short = client.get(url, shortcut)
    long = client.get(url, {"start": start, "end": end})
    # then both answer the same
    assert short.status_code == 200 and short.json() == long.json()
    assert short.json()["periods"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"month": "2026-13"}, "month"),
        ({"week": "2026-W54"}, "week"),
        ({"month": "2026-11", "start": "2026-11-01"}, "non_field_errors"),
        ({}, "start"),
    ],
)
def test_a_bad_shortcut_is_a_400_that_names_it(world: OutcomesWorld, query, field) -> None:
    response = _client(world).get(f"/api/teams/{world.vision.pk}/rollup/", query)
    assert response.status_code == 400 and field in response.json()


def test_compare_gives_each_team_its_rollup_total_in_minor_units(world: OutcomesWorld) -> None:
    # given finance's client
    client = _client(world)
    # when it compares the teams and reads vision's rollup over the same days
    teams = {t["team"]: t for t in client.get("/api/teams/compare/", PERIOD).json()}
    rollup = client.get(f"/api/teams/{world.vision.pk}/rollup/", PERIOD).json()
    # then vision's line has the rollup's totals, in minor units and in kWh
    assert teams["vision"]["cost"] == rollup["totals"]["cost"]
    assert Decimal(teams["vision"]["cost_exact"]) == Decimal(rollup["totals"]["cost_exact"])
    assert teams["vision"]["energy_kwh"] == pytest.approx(rollup["totals"]["energy_kwh"])
    assert set(teams) == {"vision", "nlp"}


@pytest.mark.parametrize("amount", ["0.005", "0.015", "-0.025", "2.5", "3.5", "0.0005", "0.0015", "7.499999"])
def test_compare_rounds_each_job_half_even_in_its_own_currency(world: OutcomesWorld, amount: str) -> None:
    # given vision's jobs each costing `amount` on one row, one of them booked in yen and one in dinars
    JobGpuHour.objects.filter(job__team=world.vision).update(cost=Decimal(0))
    jobs = list(Job.objects.filter(team=world.vision, excluded_from_bill=False).order_by("pk"))
    for job in jobs:
        row = JobGpuHour.objects.filter(job=job).order_by("pk").first()
        JobGpuHour.objects.filter(pk=row.pk).update(cost=Decimal(amount))
    currencies = {job.pk: "EUR" for job in jobs} | {jobs[0].pk: "JPY", jobs[1].pk: "kwd"}
    for pk, currency in currencies.items():
        Job.objects.filter(pk=pk).update(currency=currency)
    day_sums_refresh(cluster_ids=[world.fleet.cluster.pk], days=[date(2026, 11, 2), date(2026, 11, 3)])
    # when the teams are compared over the period (rounded in Postgres)
    start, end = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC)
    booked = team_totals_costs_minor(user=world.finance, start=start, end=end)
    # then vision's cost is the sum of its jobs each rounded as apps.core.units.money rounds it in its own currency
    expected = sum((round_minor(Decimal(amount), currencies[job.pk]) for job in jobs), Decimal(0))
    assert str(booked["vision"]) == str(expected)


def test_job_group_outcomes_add_up_in_minor_units_to_the_groups_job_rows(world: OutcomesWorld) -> None:
    # given finance's client
    client = _client(world)
    # when it reads how the group's runs ended, and the group's jobs
    doc = client.get(f"/api/job-groups/{world.group.pk}/outcomes/", PERIOD).json()
    jobs = [j for team in ("vision", "nlp") for j in _all_jobs(client, team) if j["job_group"] == "sweeps"]
    # then each outcome's cost is its runs' rounded costs added up, and the total theirs
    by_outcome = {o["outcome"]: Decimal(o["cost"]) for o in doc["outcomes"]}
    assert Decimal(doc["total"]["cost"]) == sum(by_outcome.values(), Decimal(0))
    assert Decimal(doc["total"]["cost"]) == sum((Decimal(j["cost"]) for j in jobs), Decimal(0))
    assert len(jobs) == 9
