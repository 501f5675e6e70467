"""Reads of jobs (apps/jobs/selectors.py): the per-job aggregate every derived step reads, energy per method, the hours
a scheduler's spans reach, a job's part of a period (with the cost of its days past retention), the jobs that served
tokens, and the lists a user may see only of their own teams. The job page's summary: tests/dashboard/
test_job_utilisation.py."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from apps.jobs.models import ExpiredJobDay, Job, JobWorkHour
from apps.jobs.selectors import (
    gpu_hour_job_counts,
    job_energy_by_method,
    job_gpu_totals,
    job_work_units,
    jobs_in_period_footprints,
    low_coverage_jobs,
    scheduler_hours,
    serving_jobs,
)
from tests.factories import (
    HOUR,
    T0,
    GpuFactory,
    JobFactory,
    JobGpuHourEnergyFactory,
    JobGpuHourFactory,
    TeamMembershipFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


# job_gpu_totals, job_energy_by_method


def test_a_jobs_rows_summed_per_gpu_over_all_its_hours() -> None:
    # given a job two hours on one GPU and one hour on another, its estimated row apart
    job = JobFactory()
    a, b = GpuFactory(node__cluster=job.cluster), GpuFactory(node__cluster=job.cluster)
    JobGpuHourFactory(job=job, gpu=a, hour=T0, energy_j=100.0, sampled_s=3600, peak_memory_bytes=5)
    JobGpuHourFactory(job=job, gpu=a, hour=T0 + HOUR, energy_j=200.0, sampled_s=1800, peak_memory_bytes=9,
                      intensity_estimated=True, cost=Decimal("1.25"))  # fmt: skip
    JobGpuHourFactory(job=job, gpu=b, hour=T0, energy_j=50.0)
    JobGpuHourFactory(job=job, gpu=b, hour=T0 + HOUR, energy_j=7.0, source="estimated")
    other = JobGpuHourFactory(energy_j=1.0)
    # when
    totals = job_gpu_totals(job_ids=[job.pk, job.pk, other.job_id])
    # then
    mine = {(t.gpu_id, t.source): t for t in totals[job.pk]}
    assert set(mine) == {(a.pk, "agent"), (b.pk, "agent"), (b.pk, "estimated")}
    on_a = mine[(a.pk, "agent")]
    assert (on_a.footprint.energy_j, on_a.sampled_s, on_a.peak_memory_bytes) == (300.0, 5400.0, 9)
    assert (on_a.first_hour, on_a.last_hour, on_a.gpu_uuid) == (T0, T0 + HOUR, a.uuid)
    assert on_a.intensity_estimated and not mine[(b.pk, "agent")].intensity_estimated
    assert on_a.footprint.cost == Decimal("2.920000") + Decimal("1.25")
    assert [t.footprint.energy_j for t in totals[other.job_id]] == [1.0]
    assert job_gpu_totals(job_ids=[]) == {}


def test_energy_per_method_over_all_hours() -> None:
    job = JobFactory()
    JobGpuHourEnergyFactory(job=job, hour=T0, method="sm_time", energy_j=10.0)
    JobGpuHourEnergyFactory(job=job, hour=T0 + HOUR, method="sm_time", energy_j=5.0)
    JobGpuHourEnergyFactory(job=job, hour=T0, method="memory", energy_j=1.0)
    assert job_energy_by_method(job_ids=[job.pk]) == {job.pk: {"sm_time": 15.0, "memory": 1.0}}


# gpu_hour_job_counts


def test_the_jobs_beside_a_job_on_each_of_its_gpu_hours() -> None:
    row = JobGpuHourFactory(hour=T0)
    job, gpu = row.job, row.gpu
    JobGpuHourFactory(job=job, gpu=gpu, hour=T0 + HOUR)
    JobGpuHourFactory(job=JobFactory(cluster=job.cluster), gpu=gpu, hour=T0)
    JobGpuHourFactory(job=JobFactory(cluster=job.cluster), gpu=gpu, hour=T0 + HOUR, source="estimated")
    JobGpuHourFactory(job=JobFactory(cluster=job.cluster), gpu=gpu, hour=T0 + 2 * HOUR)  # not the job's hour
    assert gpu_hour_job_counts(job=job) == {(gpu.pk, T0): 2, (gpu.pk, T0 + HOUR): 1}


# scheduler_hours


def test_the_whole_hours_a_scheduler_span_and_earlier_estimates_reach() -> None:
    # given a span 10:20 to 12:10, and an estimate left at 13:00 by a longer span before
    job = JobFactory(scheduler_start=T0 + timedelta(minutes=20), scheduler_end=T0 + 2 * HOUR + timedelta(minutes=10),
                     scheduler_seen_at=T0 + 2 * HOUR + timedelta(minutes=30))  # fmt: skip
    assert scheduler_hours(job_ids=[job.pk]) == (T0, T0 + 3 * HOUR)
    JobGpuHourFactory(job=job, hour=T0 + 3 * HOUR, source="estimated")
    assert scheduler_hours(job_ids=[job.pk]) == (T0, T0 + 4 * HOUR)


def test_a_span_ending_on_the_hour_ends_there_and_no_span_is_none() -> None:
    job = JobFactory(scheduler_start=T0, scheduler_end=T0 + HOUR, scheduler_seen_at=T0 + HOUR)
    assert scheduler_hours(job_ids=[job.pk]) == (T0, T0 + HOUR)
    assert scheduler_hours(job_ids=[JobFactory(scheduler_start=None).pk]) is None
    assert scheduler_hours(job_ids=[]) is None


# jobs_in_period_footprints


def test_a_jobs_part_of_a_period_with_its_expired_days_wholly_inside() -> None:
    # given a job's rows at 10:00 on the 2nd and 3rd, and the cost of two days past retention (1 and 4 November)
    job = JobFactory()
    JobGpuHourFactory(job=job, hour=T0, energy_j=10.0, cost=Decimal("1"))
    JobGpuHourFactory(job=job, hour=T0 + 24 * HOUR, energy_j=20.0, cost=Decimal("2"))
    for day, cost in ((1, "5"), (4, "7")):
        ExpiredJobDay.objects.create(job=job, cluster=job.cluster, day=T0.date().replace(day=day), cost=Decimal(cost))
    # when the period is the 2nd from 10:00 to the 4th at 00:00
    found = jobs_in_period_footprints(job_ids=[job.pk], start=T0, end=T0 + 38 * HOUR)
    # then both rows, and neither expired day (the 1st is before; the 4th after)
    assert (found[job.pk].energy_j, found[job.pk].cost) == (30.0, Decimal("3"))
    # a period that starts at midnight takes its first day's expired cost; an open side takes everything
    whole = jobs_in_period_footprints(job_ids=[job.pk], start=T0 - 34 * HOUR, end=None)
    assert whole[job.pk].cost == Decimal("15")
    assert jobs_in_period_footprints(job_ids=[job.pk], start=None, end=T0)[job.pk].cost == Decimal("5")


def test_a_job_with_nothing_in_the_period_is_absent() -> None:
    job = JobGpuHourFactory(hour=T0).job
    assert jobs_in_period_footprints(job_ids=[job.pk], start=T0 + HOUR, end=T0 + 2 * HOUR) == {}
    assert jobs_in_period_footprints(job_ids=[], start=None, end=None) == {}


# serving_jobs, job_work_units


def test_the_jobs_that_served_tokens_with_what_each_model_served_and_their_footprint() -> None:
    row = JobGpuHourFactory(hour=T0, energy_j=3.6e6)
    job = row.job
    for hour in (T0, T0 + HOUR):
        JobWorkHour.objects.create(job=job, hour=hour, engine="vllm", model="llama", output_tokens=100, requests=2)
    JobWorkHour.objects.create(
        job=job, hour=T0, engine="fleetwatt", unit="step", units=50
    )  # its own counter: not served
    trainer = JobFactory(cluster=job.cluster)
    JobWorkHour.objects.create(job=trainer, hour=T0, engine="fleetwatt", unit="step", units=50)
    # when
    [served] = serving_jobs(jobs=Job.objects.all(), start=T0, end=T0 + 2 * HOUR)
    # then
    assert (served.job_id, served.team, served.cluster) == (job.pk, job.team.name, job.cluster.name)
    assert served.by_model["llama"].output_tokens == 200 and served.by_model["llama"].requests == 4
    assert served.footprint is not None and served.footprint.energy_j == 3.6e6
    # an hour with tokens and no measured row has no footprint
    [later] = serving_jobs(jobs=Job.objects.all(), start=T0 + HOUR, end=None)
    assert later.footprint is None and later.by_model["llama"].output_tokens == 100
    assert serving_jobs(jobs=Job.objects.none(), start=None, end=None) == []


def test_a_jobs_own_work_units_per_unit() -> None:
    job = JobFactory()
    JobWorkHour.objects.create(job=job, hour=T0, engine="fleetwatt", unit="step", units=50)
    JobWorkHour.objects.create(job=job, hour=T0 + HOUR, engine="fleetwatt", unit="step", units=25)
    JobWorkHour.objects.create(job=job, hour=T0, engine="vllm", model="llama", output_tokens=9)
    assert job_work_units(job=job) == {"step": 75.0}


# low_coverage_jobs


def test_low_coverage_jobs_of_the_users_own_teams_worst_first() -> None:
    # given a member of one team, jobs of theirs and of another team under the threshold
    user = UserFactory()
    mine = TeamMembershipFactory(user=user).team
    worse = JobFactory(team=mine, coverage=0.2)
    bad = JobFactory(team=mine, coverage=0.5)
    JobFactory(team=mine, coverage=0.95)  # above the threshold
    JobFactory(team=mine, coverage=0.0, sampled_s=0.0)  # never sampled: no coverage to speak of
    JobFactory(coverage=0.1)  # another team's
    # when
    found = low_coverage_jobs(user=user, start=T0, end=T0 + HOUR, threshold=0.8)
    # then
    assert found == [worse, bad]
    assert low_coverage_jobs(user=user, start=T0, end=T0 + HOUR, threshold=0.8, team=JobFactory().team) == []
