"""Job groups' runs by how they ended and the failed runs (apps/rollups/outcome_selectors.py): each outcome the sum of
its runs' rows in the period, the outcomes adding up to the group's total, every group listed; money booked as the
sum of the runs' costs each rounded; the failed runs with a finding, costliest first, per team the sum of their
rounded costs; of the jobs the user may see only."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from apps.jobs.models import Job, JobGpuHour
from apps.jobs.states import OUTCOMES
from apps.rollups.outcome_selectors import (
    failed_run_jobs,
    failed_run_totals,
    job_group_outcome_costs_minor,
    job_group_outcomes,
    job_group_outcomes_booked,
    job_groups_outcome_costs_minor,
    job_groups_outcome_sums,
)
from tests.factories import FlagFactory, JobFactory, JobGroupFactory
from tests.rollups.day_world import END, HOUR, ROW_J, START, T0, DayWorld, day_world_build

pytestmark = pytest.mark.django_db

D = Decimal


@pytest.fixture
def world() -> DayWorld:
    w = day_world_build()
    # beside the group's completed run (vision) and failed one (nlp): a cancelled run and one that timed out
    for key, state, hours, cost in (
        ("v-cancel", "cancelled", (10, 11), "0.255"),
        ("v-timeout", "timeout", (12,), "0.105"),
    ):
        start = T0 + hours[0] * HOUR
        job = JobFactory(cluster=w.cluster, team=w.vision, job_key=f"slurm/{key}", state=state, job_group=w.group,
                         start=start, last_seen=start + len(hours) * HOUR, first_day=start.date(),
                         last_day=start.date(), cost=D(cost) * len(hours))  # fmt: skip
        for h in hours:
            JobGpuHour.objects.create(job=job, gpu=w.gpus[0], hour=T0 + h * HOUR, source="agent", energy_j=ROW_J,
                                      occupancy_s=3600.0, facility_kwh=0.6, embodied_kg=0.01, cost=D(cost))  # fmt: skip
        w.jobs[key] = job
    JobGroupFactory(name="alpha")  # a group with no run
    return w


def _outcome(doc: dict, group: str, outcome: str) -> dict:
    found = next(g for g in doc["groups"] if g["name"] == group)
    return next(o for o in found["outcomes"] if o["outcome"] == outcome)


def test_each_outcome_is_its_runs_rows_and_the_outcomes_add_up_to_the_groups_total(world: DayWorld) -> None:
    # when finance reads the groups' runs by outcome
    doc = job_group_outcomes(user=world.finance, start=START, end=END)
    # then every group is listed by name, each outcome in OUTCOMES' order, zeros where none ran
    assert [g["name"] for g in doc["groups"]] == ["alpha", "sweeps"]
    alpha, sweeps = doc["groups"]
    assert [o["outcome"] for o in sweeps["outcomes"]] == list(OUTCOMES)
    assert [o["label"] for o in sweeps["outcomes"]] == [info.label for info in OUTCOMES.values()]
    assert alpha["total"]["jobs"] == 0 and alpha["failed_cost_share"] is None
    # each outcome: its runs and their rows' sums
    for outcome, info in OUTCOMES.items():
        runs = Job.objects.filter(job_group=world.group, state__in=[s.value for s in info.states])
        rows = JobGpuHour.objects.filter(job__in=runs).aggregate(j=Sum("energy_j"), c=Sum("cost"))
        found = _outcome(doc, "sweeps", outcome)
        assert found["jobs"] == runs.count(), outcome
        assert (found["energy_j"], found["cost"]) == (pytest.approx(rows["j"] or 0.0), rows["c"] or D(0)), outcome
    # the outcomes add up to the total, and the failed share is the failed runs' part of its cost
    total = sweeps["total"]
    assert total["jobs"] == sum(o["jobs"] for o in sweeps["outcomes"]) == 4
    assert total["cost"] == sum(o["cost"] for o in sweeps["outcomes"])
    assert total["energy_j"] == pytest.approx(sum(o["energy_j"] for o in sweeps["outcomes"]))
    failed = _outcome(doc, "sweeps", "failed")
    assert failed["jobs"] == 2 and sweeps["failed_cost_share"] == pytest.approx(float(failed["cost"] / total["cost"]))
    assert (doc["currency"], doc["intensity_basis"], doc["intensity_zones"]) == ("EUR", "location", ["DE"])


def test_a_member_sees_their_teams_runs_only(world: DayWorld) -> None:
    mine = job_group_outcomes(user=world.member, start=START, end=END)
    # nlp's failed run is not counted; vision's time-out is
    failed = _outcome(mine, "sweeps", "failed")
    assert failed["jobs"] == 1 and failed["cost"] == D("0.105")


def test_only_the_rows_inside_the_period_count(world: DayWorld) -> None:
    # when the period holds the completed run's last hour (and no other run's)
    found = job_groups_outcome_sums(user=world.finance, start=T0 + 3 * HOUR, end=T0 + 4 * HOUR, groups=[world.group.pk])
    # then that run, its one row
    assert list(found.sums) == [(world.group.pk, "completed")]
    row = found.sums[(world.group.pk, "completed")]
    assert (row["run_count"], row["energy_j"]) == (1, pytest.approx(ROW_J))
    assert found.run_costs[(world.group.pk, "completed")] == [D("0.333333")]
    assert found.clusters == [world.cluster.pk]


def test_each_outcomes_money_is_its_runs_costs_each_rounded(world: DayWorld) -> None:
    # when the groups' runs are booked in minor units
    doc, booked = job_group_outcomes_booked(user=world.finance, start=START, end=END)
    one = job_group_outcome_costs_minor(user=world.finance, start=START, end=END, group=world.group, currency="EUR")
    several = job_groups_outcome_costs_minor(
        user=world.finance, start=START, end=END, groups=[world.group.pk], currency="EUR"
    )
    # then each outcome is its runs' costs rounded one by one: failed 0.12 + 0.10 (0.125 and 0.105, half to even),
    # not their sum rounded (0.23)
    expected = {"completed": D("1.00"), "failed": D("0.22"), "cancelled": D("0.51")}
    assert one == expected
    assert several == booked == {(world.group.pk, outcome): cost for outcome, cost in expected.items()}
    assert doc == job_group_outcomes(user=world.finance, start=START, end=END)
    # and a member's are of their teams' runs
    mine = job_group_outcome_costs_minor(user=world.member, start=START, end=END, group=world.group, currency="EUR")
    assert mine["failed"] == D("0.10")


def test_the_failed_runs_are_those_with_a_finding_costliest_first(world: DayWorld) -> None:
    # given findings on vision's and nlp's failed runs and a second failed run of vision's; the time-out has none
    across, nlp = world.jobs["v-across"], world.jobs["n-within"]
    second = JobFactory(cluster=world.cluster, team=world.vision, state="failed", start=T0 + 6 * HOUR,
                        last_seen=T0 + 7 * HOUR, cost=D("0.125"), gpu_hours=1.0)  # fmt: skip
    for job in (across, nlp, second):
        FlagFactory(cluster=world.cluster, job=job, kind="failed_run", evidence={"cost": str(job.cost)})
    # then finance sees the three, costliest first; a member their team's; a team's page its own
    assert list(failed_run_jobs(user=world.finance, start=START, end=END)) == [across, nlp, second]
    assert list(failed_run_jobs(user=world.member, start=START, end=END)) == [across, second]
    assert list(failed_run_jobs(user=world.finance, start=START, end=END, team=world.nlp)) == [nlp]
    # and a period none of them ran in has none
    assert not failed_run_jobs(user=world.finance, start=END + timedelta(days=1), end=END + timedelta(days=2))
    # per team: the runs, their figures, and their cost the sum of each run's rounded (1.33 + 0.12, not 1.46)
    totals = failed_run_totals(user=world.finance, start=START, end=END)
    assert [(t["team"], t["currency"], t["runs"], t["cost"]) for t in totals] == [
        ("nlp", "EUR", 1, D("0.12")),
        ("vision", "EUR", 2, D("1.45")),
    ]
    vision = totals[1]
    assert vision["gpu_hours"] == pytest.approx(across.gpu_hours + second.gpu_hours)
    assert vision["energy_kwh"] == pytest.approx((across.energy_j + second.energy_j) / 3.6e6)
    assert failed_run_totals(user=world.member, start=START, end=END) == [vision]
