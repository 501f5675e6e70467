"""The derivation pipeline: which steps a change runs, in which order, and that a run can be repeated."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.derive import STEPS, Fact, Scope, derive
from apps.rollups.models import ClusterDay, JobGroupDay, TeamDay
from apps.waste.models import Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

ALL_STEPS = [s.name for s in STEPS]


def _fields(model: Any) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if not f.primary_key]


def _snapshot() -> dict[str, list[tuple]]:
    """Every derived figure: equal twice means a run changed nothing."""
    return {
        "jobs": list(Job.objects.order_by("pk").values_list()),
        "rows": list(JobGpuHour.objects.order_by("pk").values_list()),
        "flags": sorted(Flag.objects.values_list("kind", "job_id", "gpu_id", "hour", "evidence")),
        "team_days": list(
            TeamDay.objects.order_by("team_id", "cluster_id", "day").values_list("team_id", "cluster_id", "day", "cost")
        ),
        "cluster_days": list(ClusterDay.objects.order_by("cluster_id", "day").values_list(*_fields(ClusterDay))),
        "group_days": list(
            JobGroupDay.objects.order_by("job_group_id", "cluster_id", "day").values_list(*_fields(JobGroupDay))
        ),
    }


@pytest.fixture
def ingested() -> Job:
    fleet = fleet_build(servers=1, gpus_per_server=2)
    intensity_set("TEST", [0.3] * 4)
    job = job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=2, power_w=500.0)
    return job


def test_every_step_reads_something_that_a_caller_or_an_earlier_step_changes() -> None:
    made = {Fact.JOB_ROWS, Fact.GROUP_RULES, Fact.FACTORS, Fact.BILLING, Fact.JOB_GROUP, Fact.SCHEDULER, Fact.GROUPS,
            Fact.FINDING_STATUS}  # fmt: skip
    for step in STEPS:
        assert step.reads & made, f"{step.name} can never run"
        assert step.why, f"{step.name} does not say why it stands where it does"
        if step.makes:
            made.add(step.makes)


@pytest.mark.parametrize(
    ("changed", "steps"),
    [
        ({Fact.JOB_ROWS}, ALL_STEPS),
        (
            {Fact.FACTORS},
            ["row_footprints", "job_footprints", "job_figures", "estimated_intensity_flags", "waste_findings",
             "failed_run_findings", "job_flag_lists", "day_sums", "team_waste_days", "caches_expire"],
        ),
        ({Fact.BILLING}, ["day_sums", "team_waste_days", "caches_expire"]),
        ({Fact.FINDING_STATUS}, ["team_waste_days", "caches_expire"]),
        (
            {Fact.JOB_GROUP},
            ["job_footprints", "job_figures", "estimated_intensity_flags", "failed_run_findings", "job_flag_lists",
             "day_sums", "team_waste_days", "caches_expire"],
        ),
        (
            {Fact.SCHEDULER},
            ["job_groups", "unobserved_estimates", "row_footprints", "job_summaries", "job_footprints", "job_figures",
             "low_coverage_flags", "estimated_intensity_flags", "waste_findings", "unobserved_flags",
             "failed_run_findings", "job_flag_lists", "day_sums", "team_waste_days", "caches_expire"],
        ),
    ],
)  # fmt: skip
def test_a_change_runs_the_steps_that_follow_from_it_in_order(
    ingested: Job, changed: set[Fact], steps: list[str]
) -> None:
    scope = Scope.hour(cluster_id=ingested.cluster_id, hour=T0, job_ids=[ingested.pk], ingested_through=T0 + 2 * HOUR)
    assert derive(scope, changed=changed).steps == steps


def test_a_run_from_the_rows_gives_the_footprints_flags_and_daily_sums(ingested: Job) -> None:
    # when the pipeline runs over everything the rows give
    report = derive(Scope(), changed={Fact.FACTORS})
    # then the job's footprint is the sum of its rows', and its team's days hold it
    ingested.refresh_from_db()
    rows = JobGpuHour.objects.filter(job=ingested)
    assert report.gpu_hours == 4 and report.jobs == 1  # 2 GPUs x 2 hours
    assert ingested.facility_kwh == pytest.approx(sum(r.facility_kwh for r in rows))
    assert ingested.cost == sum((r.cost for r in rows), Decimal(0))
    days = TeamDay.objects.filter(team=ingested.team)
    assert sum(d.cost for d in days) == ingested.cost


def test_running_twice_changes_nothing(ingested: Job) -> None:
    derive(Scope(), changed={Fact.FACTORS})
    first = _snapshot()
    derive(Scope(), changed={Fact.FACTORS})
    assert _snapshot() == first


def test_a_billing_change_rebuilds_the_days_of_the_job_only(ingested: Job) -> None:
    # given the days built, and the job then excluded from its team's bill
    derive(Scope(), changed={Fact.FACTORS})
    Job.objects.filter(pk=ingested.pk).update(excluded_from_bill=True)
    # when its billing change is derived
    derive(Scope.jobs([ingested.pk]), changed={Fact.BILLING})
    # then its team's days no longer hold it
    assert not TeamDay.objects.filter(team=ingested.team).exists()
