"""Each job's stored days (apps.rollups.models.JobDay, kept by apps.rollups.services.day_sums_refresh): what a team's
page and its job list add up, kept by the derivation and by an admin's decisions to what the rows and the jobs say at
every moment, the sums exact (numeric), so that a job's days added up are its rows' sums to the last bit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import transaction

from apps.carbon.models import JobGroup
from apps.core.units.aggregates import footprint_sums
from apps.core.units.money import round_minor
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline import decisions
from apps.pipeline.derive import Fact, Scope, derive
from apps.rollups.models import JobDay
from tests.carbon.fleet_builder import HOUR
from tests.rollups.job_days_world import (
    START,
    JobDaysWorld,
    days_from_rows,
    job_days_world_build,
    lines_from_days,
    stored_days,
    stored_lines,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> JobDaysWorld:
    return job_days_world_build()


def test_each_jobs_day_is_its_rows_of_that_day_summed_exactly_with_its_lines(world: JobDaysWorld) -> None:
    stored = stored_days()
    # then every day of every job with rows is stored, its sums exact (numeric: equal as decimals), with its lines
    assert stored == days_from_rows()
    long, short, empty = (world.jobs[k].pk for k in ("slurm/long", "slurm/short", "slurm/empty"))
    assert {day for job_id, day in stored if job_id == long} == {START.date(), *(d.date() for d in (
        START + 24 * HOUR, START + 40 * HOUR - HOUR))}  # fmt: skip
    assert not any(job_id == empty for job_id, _ in stored)
    # a job within one day is that day, with its booked cost; a job across days has none on any of its days
    booked = round_minor(world.jobs["slurm/short"].cost, "EUR")
    assert [(v[6], v[7]) for (job_id, _), v in stored.items() if job_id == short] == [(True, booked)]
    assert all(v[6] is False and v[7] is None for (job_id, _), v in stored.items() if job_id == long)
    # and read back as floats, each day is the footprints' sum of that day's rows, to the last bit
    rows = JobGpuHour.objects.filter(job_id=long, hour__gte=START, hour__lt=START + 4 * HOUR)
    first = JobDay.objects.get(job_id=long, day=START.date())
    assert float(first.energy_j) == rows.aggregate(**footprint_sums())["energy_j"]


def test_each_teams_lines_of_a_day_are_its_jobs_within_that_day_added_up(world: JobDaysWorld) -> None:
    lines = stored_lines()
    # then each team's lines of its jobs on the bill within one day are those jobs' days added up, exactly
    assert lines == lines_from_days(days_from_rows())
    # the short run and its twin are one line (ada's, in the group, on Nov 30), with two jobs and both booked costs
    short, twin = world.jobs["slurm/short"], world.jobs["slurm/twin"]
    line = lines[(world.vision.pk, short.cluster_id, short.first_day, "ada", world.group.pk, "EUR")]
    assert line[:2] == (2, round_minor(short.cost, "EUR") + round_minor(twin.cost, "EUR"))
    # the jobs across days, and the one with no row, are on no line
    assert sum(v[0] for v in lines.values()) == 3


def test_an_hour_ingested_again_leaves_the_days_as_they_were(world: JobDaysWorld) -> None:
    before, lines = stored_days(), stored_lines()
    job = world.jobs["slurm/long"]
    hour = START + 30 * HOUR
    # when an hour of the long run is derived again, as a re-ingest of the same answer derives it
    with transaction.atomic():
        derive(Scope.hour(cluster_id=job.cluster_id, hour=hour, job_ids=[job.pk], ingested_through=hour + HOUR),
               changed={Fact.JOB_ROWS})  # fmt: skip
    # then its days (and every other) are as they were, and the teams' lines
    assert stored_days() == before
    assert stored_lines() == lines


def test_an_admins_decisions_move_a_jobs_days_to_its_new_lines(world: JobDaysWorld) -> None:
    long, late = world.jobs["slurm/long"], world.jobs["slurm/late"]
    other = JobGroup.objects.create(name="other", match_kind="name_prefix", match_value="zzz-")
    # when an admin excludes the long run from its bill, charges the late one to nlp, and moves it to another group
    decisions.job_exclude(actor=world.admin, job=long, exclude=True, reason="a benchmark")
    decisions.job_reassign(actor=world.admin, job=Job.objects.get(pk=late.pk), team=world.nlp, reason="theirs")
    decisions.job_reassign(actor=world.admin, job=Job.objects.get(pk=late.pk), job_group=other, reason="its model")
    # and excludes the short run's twin (within one day) from the bill, and moves bob's run of that day to the group
    before = stored_lines()
    decisions.job_exclude(actor=world.admin, job=world.jobs["slurm/twin"], exclude=True, reason="a rerun")
    decisions.job_reassign(actor=world.admin, job=world.jobs["slurm/other"], job_group=other, reason="its model")
    # then every day of each follows, as the rows and the jobs now say, and the teams' lines
    stored = stored_days()
    assert stored == days_from_rows()
    lines = stored_lines()
    assert lines == lines_from_days(stored)
    day, cluster = world.jobs["slurm/short"].first_day, long.cluster_id
    assert lines[(world.vision.pk, cluster, day, "ada", world.group.pk, "EUR")][0] == 1
    assert (world.vision.pk, cluster, day, "bob", None, "EUR") in before
    assert (world.vision.pk, cluster, day, "bob", None, "EUR") not in lines
    assert lines[(world.vision.pk, cluster, day, "bob", other.pk, "EUR")][0] == 1
    assert all(v[4] is False for (job_id, _), v in stored.items() if job_id == long)
    assert all(v[0] == world.nlp.pk and v[3] == other.pk for (job_id, _), v in stored.items() if job_id == late.pk)


def test_a_job_that_runs_on_past_midnight_leaves_its_first_day_as_a_day_of_a_job_across_days(
    world: JobDaysWorld,
) -> None:
    short = world.jobs["slurm/short"]
    assert JobDay.objects.get(job=short).within_day
    # when the short run's next hours come in, on the next day
    gpu = JobGpuHour.objects.filter(job=short).first().gpu  # type: ignore[union-attr]
    hour = datetime(2026, 12, 1, 0, tzinfo=UTC)
    JobGpuHour.objects.create(job=short, gpu=gpu, hour=hour, source="agent", energy_j=1.5e5, sampled_s=3600,
                              occupancy_s=3600)  # fmt: skip
    with transaction.atomic():
        derive(Scope.hour(cluster_id=short.cluster_id, hour=hour, job_ids=[short.pk], ingested_through=hour + HOUR),
               changed={Fact.JOB_ROWS})  # fmt: skip
    # then both of its days are those of a job across days, with no booked cost of their own
    days = JobDay.objects.filter(job=short).order_by("day")
    assert [(d.day.isoformat(), d.within_day, d.cost_booked) for d in days] == [
        ("2026-11-30", False, None), ("2026-12-01", False, None)
    ]  # fmt: skip
    assert stored_days() == days_from_rows()
    assert stored_lines() == lines_from_days(stored_days())
