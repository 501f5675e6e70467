"""A job group's runs split by how they ended (apps.rollups.outcome_selectors.job_group_outcomes) and its endpoint
`/api/job-groups/{id}/outcomes/`: what the delivered model cost, failures included."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum
from rest_framework.test import APIClient

from apps.core.units.footprint import Footprint
from apps.core.units.money import round_minor
from apps.jobs.models import JobGpuHour
from apps.jobs.states import OUTCOMES
from apps.rollups.outcome_selectors import failed_run_jobs, failed_run_totals, job_group_outcomes
from apps.rollups.selectors import job_group_rollup
from tests.carbon.fleet_builder import T0

from .outcomes_world import PERIOD, RUNS, OutcomesWorld, outcomes_world_build

pytestmark = pytest.mark.django_db

START, END = T0, T0 + timedelta(days=2)  # PERIOD
OUTCOME_OF = {"completed": "completed", "failed": "failed", "timeout": "failed", "out_of_memory": "failed",
              "node_fail": "failed", "cancelled": "cancelled", "preempted": "cancelled", "running": "other",
              "pending": "other", "unknown": "other"}  # fmt: skip


@pytest.fixture
def world() -> OutcomesWorld:
    return outcomes_world_build()


def _rows_footprint(world: OutcomesWorld, keys: list[str]) -> Footprint:
    rows = JobGpuHour.objects.filter(job__in=[world.jobs[k] for k in keys], hour__gte=START, hour__lt=END)
    sums = rows.aggregate(
        energy_j=Sum("energy_j"), occupancy_s=Sum("occupancy_s"), facility_kwh=Sum("facility_kwh"),
        operational_kg=Sum("operational_kg"), embodied_kg=Sum("embodied_kg"), cost=Sum("cost"),
    )  # fmt: skip
    return Footprint.from_sums(sums)


def test_the_split_adds_each_outcome_s_runs_and_up_to_the_group_s_rollup(world: OutcomesWorld) -> None:
    # when the admin asks for the group's split
    doc = job_group_outcomes(user=world.admin, start=START, end=END)
    [group] = doc["groups"]
    split = {o["outcome"]: o for o in group["outcomes"]}
    # then the four outcomes, in order, each the sum of its runs' rows
    assert [o["outcome"] for o in group["outcomes"]] == list(OUTCOMES) == ["completed", "failed", "cancelled", "other"]
    grouped = [k for k, run in RUNS.items() if run[7].startswith("sweep-")]
    for outcome in OUTCOMES:
        keys = [k for k in grouped if OUTCOME_OF[RUNS[k][1]] == outcome]
        expected = _rows_footprint(world, keys)
        assert split[outcome]["jobs"] == len(keys), outcome
        assert split[outcome]["energy_j"] == pytest.approx(expected.energy_j), outcome
        assert split[outcome]["gpu_hours"] == pytest.approx(expected.gpu_hours), outcome
        assert split[outcome]["facility_kwh"] == pytest.approx(expected.facility_kwh), outcome
        assert split[outcome]["co2e_kg"] == pytest.approx(expected.co2e_kg), outcome
        assert split[outcome]["cost"] == expected.cost, outcome
    assert split["failed"]["jobs"] == 3 and split["cancelled"]["jobs"] == 2 and split["other"]["jobs"] == 2
    # and together they are the group's rollup over the period, to the cent
    rollup = job_group_rollup(group=world.group, start=START, end=END, granularity="month")
    assert group["total"]["cost"] == sum((Decimal(p["cost"]) for p in rollup["periods"]), Decimal(0))
    assert group["total"]["energy_j"] == pytest.approx(sum(p["energy_j"] for p in rollup["periods"]))
    assert group["failed_cost_share"] == pytest.approx(float(split["failed"]["cost"] / group["total"]["cost"]))
    assert (doc["currency"], doc["intensity_basis"]) == ("EUR", "location")


def test_a_member_counts_their_teams_runs_only(world: OutcomesWorld) -> None:
    mine = job_group_outcomes(user=world.member, start=START, end=END)["groups"][0]
    every = job_group_outcomes(user=world.finance, start=START, end=END)["groups"][0]
    split = {o["outcome"]: o["jobs"] for o in mine["outcomes"]}
    assert split == {"completed": 1, "failed": 2, "cancelled": 1, "other": 2}  # vision's sweeps
    assert every["total"]["jobs"] == 9 and mine["total"]["cost"] < every["total"]["cost"]


def test_the_split_is_one_aggregate_query(world: OutcomesWorld, django_assert_num_queries) -> None:
    # the groups, the sums of every group and outcome, the sites' basis: whatever the number of groups and runs
    with django_assert_num_queries(3):
        job_group_outcomes(user=world.admin, start=START, end=END)


def test_a_period_without_runs_lists_the_group_with_zeros(world: OutcomesWorld) -> None:
    later = END.replace(day=10)
    [group] = job_group_outcomes(user=world.admin, start=later, end=later.replace(day=11))["groups"]
    assert group["total"]["jobs"] == 0 and group["failed_cost_share"] is None


def test_failed_runs_are_the_failed_run_findings_costliest_first(world: OutcomesWorld) -> None:
    runs = list(failed_run_jobs(user=world.admin, start=START, end=END))
    assert {j.job_key for j in runs} == {"slurm/12", "slurm/13", "slurm/21", "slurm/31"}
    assert [j.cost for j in runs] == sorted((j.cost for j in runs), reverse=True)
    totals = {t["team"]: t for t in failed_run_totals(user=world.admin, start=START, end=END)}
    assert totals["vision"]["runs"] == 3 and totals["nlp"]["runs"] == 1
    vision_runs = [j for j in runs if j.team_id == world.vision.pk]
    # (each run's cost rounded to the cent, as /api/jobs/ shows it, then added up: the bill's rule)
    assert totals["vision"]["cost"] == sum((round_minor(j.cost, j.currency) for j in vision_runs), Decimal(0))
    assert totals["vision"]["facility_kwh"] == pytest.approx(sum(j.facility_kwh for j in vision_runs))
    # a member sees their team's only
    assert [t["team"] for t in failed_run_totals(user=world.member, start=START, end=END)] == ["vision"]


# --- the endpoint ---------------------------------------------------------------------------------------------


def _get(user, world: OutcomesWorld, **query: str):
    api = APIClient()
    if user is not None:
        api.force_authenticate(user)
    return api.get(f"/api/job-groups/{world.group.pk}/outcomes/", {**PERIOD, **query})


def test_the_endpoint_answers_every_role_with_what_it_may_see(world: OutcomesWorld) -> None:
    assert _get(None, world).status_code == 401
    finance = _get(world.finance, world).json()
    member = _get(world.member, world).json()
    assert finance["job_group"] == "sweeps" and finance["currency"] == "EUR"
    assert [o["outcome"] for o in finance["outcomes"]] == ["completed", "failed", "cancelled", "other"]
    assert finance["total"]["jobs"] == 9 and member["total"]["jobs"] == 6
    assert isinstance(finance["total"]["cost"], str) and Decimal(finance["total"]["cost"]) > 0  # money as text
    expected = job_group_outcomes(user=world.finance, start=START, end=END)["groups"][0]
    assert Decimal(finance["outcomes"][1]["cost_exact"]) == expected["outcomes"][1]["cost"]


def test_the_endpoint_refuses_a_bad_period_and_writes_as_csv(world: OutcomesWorld) -> None:
    assert _get(world.member, world, start="2026-11-04", end="2026-11-02").status_code == 400
    assert _get(world.member, world, start="soon").status_code == 400
    csv = _get(world.finance, world, format="csv")
    lines = csv.content.decode().splitlines()
    assert csv["Content-Type"].startswith("text/csv") and len(lines) == 5
    assert lines[0].startswith("job_group,outcome,label,jobs,") and "currency" in lines[0]
    assert APIClient().post(f"/api/job-groups/{world.group.pk}/outcomes/").status_code == 401
