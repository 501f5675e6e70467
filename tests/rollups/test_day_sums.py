"""Cluster and job group rollups of whole UTC days read the daily sums (ClusterDay, JobGroupDay) the derivation
keeps: the same documents and minor-unit costs as read from the rows (the oracle: the same range less a
microsecond, which the daily sums do not answer), after an admin moves a job to another group or excludes it from
its team's bill; a range over days past retention still reads the rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction

from apps.carbon.models import JobGroup
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour, JobGpuHourEnergy
from apps.pipeline.decisions import job_exclude, job_reassign
from apps.pipeline.derive import Fact, Scope, derive
from apps.rollups import cost_selectors, selectors
from apps.rollups.models import ClusterDay, JobGroupDay
from apps.rollups.services import day_sums_refresh
from apps.telemetry.models import GpuHour
from tests.rollups.outcomes_world import OutcomesWorld, outcomes_world_build

pytestmark = pytest.mark.django_db

START, END = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC)
FROM_ROWS = END - timedelta(microseconds=1)  # not a midnight: read from the rows, the same hours
GRANULARITIES = ("day", "week", "month")


@pytest.fixture
def world() -> OutcomesWorld:
    return outcomes_world_build()


def _approx(doc: Any) -> Any:
    """Floats to the last bits (the daily sums add days, the rows add rows), money and everything else exact."""
    if isinstance(doc, float):
        return pytest.approx(doc, rel=1e-12, abs=1e-9)
    if isinstance(doc, dict):
        return {k: _approx(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_approx(v) for v in doc]
    return doc


def _same_as_from_rows(world: OutcomesWorld) -> None:
    cluster, group = world.fleet.cluster, world.group
    for granularity in GRANULARITIES:
        kept = selectors.cluster_rollup(cluster=cluster, start=START, end=END, granularity=granularity)
        assert kept == _approx(selectors.cluster_rollup(cluster=cluster, start=START, end=FROM_ROWS,
                                                        granularity=granularity)), granularity  # fmt: skip
        kept = selectors.job_group_rollup(group=group, start=START, end=END, granularity=granularity)
        assert kept == _approx(selectors.job_group_rollup(group=group, start=START, end=FROM_ROWS,
                                                          granularity=granularity)), granularity  # fmt: skip
        for costs, subject in ((cost_selectors.cluster_job_costs_minor, {"cluster": cluster}),
                               (cost_selectors.job_group_job_costs_minor, {"group": group})):  # fmt: skip
            from_days = costs(**subject, start=START, end=END, granularity=granularity, currency="EUR")
            from_rows = costs(**subject, start=START, end=FROM_ROWS, granularity=granularity, currency="EUR")
            assert {k: v for k, v in from_days.items() if v} == {k: v for k, v in from_rows.items() if v}


def test_cluster_and_group_rollups_of_whole_days_are_their_daily_sums_as_read_from_the_rows(
    world: OutcomesWorld,
) -> None:
    # given the derived world: the cluster's and the group's days are summed, with an idle line and costs
    assert ClusterDay.objects.filter(cluster=world.fleet.cluster, gpu_hours_total__gt=0).exists()
    assert JobGroupDay.objects.filter(job_group=world.group).exists()
    doc = selectors.cluster_rollup(cluster=world.fleet.cluster, start=START, end=END, granularity="day")
    assert any(p["idle"] for p in doc["periods"]) and any(p["cost"] for p in doc["periods"])
    # then whole days read from them are what the rows give
    _same_as_from_rows(world)


def test_a_job_moved_to_another_group_or_off_its_team_s_bill_moves_its_days(world: OutcomesWorld) -> None:
    # given a job of the group
    job = Job.objects.filter(job_group=world.group).order_by("pk").first()
    assert job is not None
    other = JobGroup.objects.create(name="other", match_kind="name_prefix", match_value="zzz-")
    before = selectors.job_group_rollup(group=world.group, start=START, end=END, granularity="month")
    # when an admin moves it to another group
    job_reassign(actor=world.admin, job=job, reason="belongs to the other model", job_group=other)
    # then its energy left the group's days for the other's, and every rollup of whole days is what the rows give
    after = selectors.job_group_rollup(group=world.group, start=START, end=END, granularity="month")
    moved = selectors.job_group_rollup(group=other, start=START, end=END, granularity="month")
    assert moved["periods"][0]["energy_j"] == pytest.approx(job.energy_j)
    assert after["periods"][0]["energy_j"] == pytest.approx(before["periods"][0]["energy_j"] - job.energy_j)
    _same_as_from_rows(world)
    # and when it is excluded from its team's bill, the cluster and the group still count it
    job_exclude(actor=world.admin, job=Job.objects.get(pk=job.pk), exclude=True, reason="a test run")
    _same_as_from_rows(world)
    cluster_doc = selectors.cluster_rollup(cluster=world.fleet.cluster, start=START, end=END, granularity="month")
    energy = sum(JobGpuHour.objects.filter(gpu__node__cluster=world.fleet.cluster).values_list("energy_j", flat=True))
    assert cluster_doc["periods"][0]["energy_j"] == pytest.approx(energy)
    moved = selectors.job_group_rollup(group=other, start=START, end=END, granularity="month")
    assert moved["periods"][0]["energy_j"] == pytest.approx(job.energy_j)


def test_jobs_a_group_s_new_rule_no_longer_matches_leave_its_days(world: OutcomesWorld) -> None:
    # given the group's rule narrowed to one run
    members = set(Job.objects.filter(job_group=world.group).values_list("pk", flat=True))
    world.group.match_value = "sweep-a"
    world.group.save()
    # when the derivation regroups the jobs (as a config or an admin's change of rules does)
    with transaction.atomic():
        derive(Scope(), changed={Fact.GROUP_RULES})
    # then the jobs that left it left its days too
    assert len(members) > Job.objects.filter(job_group=world.group).count() > 0
    _same_as_from_rows(world)


def test_a_day_of_gpu_hours_and_no_job_has_its_idle_line(world: OutcomesWorld) -> None:
    # given a later day the GPUs were on and ran nothing
    gpu_hour = GpuHour.objects.filter(gpu__node__cluster=world.fleet.cluster).order_by("pk").first()
    assert gpu_hour is not None
    quiet = datetime(2026, 11, 5, 3, tzinfo=UTC)
    gpu_hour.pk, gpu_hour.hour, gpu_hour.jobs_energy_j, gpu_hour.occupied_s = None, quiet, 0.0, 0.0
    gpu_hour.estimated_j = gpu_hour.estimated_s = 0.0
    gpu_hour.save()
    day_sums_refresh(cluster_ids=[world.fleet.cluster.pk], days=[quiet.date()])
    # then that day is an idle line of its own, as from the rows
    start, end = datetime(2026, 11, 5, tzinfo=UTC), datetime(2026, 11, 6, tzinfo=UTC)
    doc = selectors.cluster_rollup(cluster=world.fleet.cluster, start=start, end=end, granularity="day")
    from_rows = selectors.cluster_rollup(cluster=world.fleet.cluster, start=start,
                                         end=end - timedelta(microseconds=1), granularity="day")  # fmt: skip
    assert doc == _approx(from_rows)
    assert doc["periods"][0]["energy_j"] == 0 and doc["periods"][0]["idle"]["energy_j"] == pytest.approx(
        gpu_hour.device_energy_j
    )


def test_the_derivation_sums_a_day_no_job_ran_on(world: OutcomesWorld) -> None:
    # given a later day the GPUs were on and ran nothing, priced through the derivation (as an ingest does)
    gpu_hour = GpuHour.objects.filter(gpu__node__cluster=world.fleet.cluster).order_by("pk").first()
    assert gpu_hour is not None
    quiet = datetime(2026, 11, 5, 3, tzinfo=UTC)
    gpu_hour.pk, gpu_hour.hour, gpu_hour.jobs_energy_j, gpu_hour.occupied_s = None, quiet, 0.0, 0.0
    gpu_hour.estimated_j = gpu_hour.estimated_s = 0.0
    gpu_hour.save()
    with transaction.atomic():
        derive(Scope(cluster_ids=frozenset({world.fleet.cluster.pk}), start=quiet, end=quiet + timedelta(hours=1)),
               changed={Fact.FACTORS})  # fmt: skip
    # then the day has its daily sum, its idle line priced
    day = ClusterDay.objects.get(cluster=world.fleet.cluster, day=quiet.date())
    assert day.energy_j == 0 and day.device_j == pytest.approx(gpu_hour.device_energy_j) and day.idle_cost > 0


def test_a_range_over_days_past_retention_reads_the_rows(world: OutcomesWorld) -> None:
    # given the first day's hour rows dropped past retention (its jobs' costs kept per day)
    first = JobGpuHour.objects.filter(hour__lt=datetime(2026, 11, 3, tzinfo=UTC))
    costs: dict[int, Decimal] = {}
    for row in first:
        costs[row.job_id] = costs.get(row.job_id, Decimal(0)) + row.cost
    for job_id, cost in costs.items():
        ExpiredJobDay.objects.create(job_id=job_id, cluster=world.fleet.cluster, day=date(2026, 11, 2), cost=cost)
    first.delete()
    JobGpuHourEnergy.objects.filter(hour__lt=datetime(2026, 11, 3, tzinfo=UTC)).delete()
    GpuHour.objects.filter(hour__lt=datetime(2026, 11, 3, tzinfo=UTC)).delete()
    # then the cluster's and the group's rollups over it read what is left, as before the daily sums (which still
    # hold that day)
    assert ClusterDay.objects.filter(cluster=world.fleet.cluster, day=date(2026, 11, 2), energy_j__gt=0).exists()
    doc = selectors.cluster_rollup(cluster=world.fleet.cluster, start=START, end=END, granularity="day")
    assert "2026-11-02" not in [p["period"] for p in doc["periods"]]
    _same_as_from_rows(world)
