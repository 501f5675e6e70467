"""A team's period summed in the database (apps/rollups/team_parts.py), against the same read from the rows: each job's
part is jobs_in_period_footprints' to the last bit (whole days from the jobs' days, the hours of a day the period cuts
from the rows, days past retention their cost); each split's line is its jobs' rows summed exactly, its cost the sum
of its jobs' booked costs and its jobs those the splits made of the parts count; the costliest jobs and the sources of
the jobs that ran; the job list's page, count, bill and choices, whatever its filters; nothing for another team."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from apps.core.units.aggregates import footprint_sums
from apps.core.units.footprint import Footprint
from apps.fleet.models import Team
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour
from apps.jobs.selectors import jobs_in_period_footprints
from apps.pipeline import decisions
from apps.rollups.breakdown import NO_GROUP, JobFilter, JobPart, bill_of
from apps.rollups.models import JobDay
from apps.rollups.team_parts import team_jobs_listed, team_parts_all, team_period_bounds, team_period_sums
from apps.rollups.team_selectors import RAN_COLUMNS, team_breakdowns, team_ran_jobs
from tests.carbon.fleet_builder import HOUR
from tests.factories import TeamMembershipFactory, UserFactory
from tests.rollups.job_days_world import DAYS, START, JobDaysWorld, job_days_world_build

pytestmark = pytest.mark.django_db

MIDNIGHT = datetime.combine(DAYS[0], datetime.min.time(), tzinfo=START.tzinfo)
PERIODS = {
    "whole days": (MIDNIGHT, MIDNIGHT + timedelta(days=4)),
    "one whole day": (MIDNIGHT + timedelta(days=1), MIDNIGHT + timedelta(days=2)),
    "days cut at both ends": (START + 3 * HOUR, START + 50 * HOUR),
    "hours of one day": (START + 5 * HOUR, START + 9 * HOUR),
    "across one midnight": (START + 2 * HOUR, START + 7 * HOUR),
}


@pytest.fixture
def world() -> JobDaysWorld:
    return job_days_world_build()


def _reference(world: JobDaysWorld, team: Team, start: datetime, end: datetime) -> list[JobPart]:
    """The parts as read from the rows: the jobs that ran (team_ran_jobs) and every other with something inside,
    each with jobs_in_period_footprints' part, the costliest first, then the newest."""
    jobs = {j.pk: j for j in team_ran_jobs(user=world.admin, team=team, start=start, end=end)}
    inside = jobs_in_period_footprints(job_ids=Job.objects.filter(team=team).values_list("pk", flat=True),
                                       start=start, end=end)  # fmt: skip
    jobs |= {j.pk: j for j in Job.objects.filter(pk__in=set(inside) - set(jobs)).values_list(*RAN_COLUMNS, named=True)}
    newest = sorted(jobs.values(), key=lambda j: (j.start is not None, -j.start.timestamp() if j.start else 0, -j.pk))
    parts = [
        JobPart(job_id=j.pk, user=j.user, group_id=j.job_group_id, group=j.job_group__name or "", state=j.state,
                currency=j.currency, on_bill=not j.excluded_from_bill, footprint=inside.get(j.pk, Footprint()))
        for j in newest
    ]  # fmt: skip
    return sorted(parts, key=lambda p: -p.cost)


def _fields(parts: list[JobPart]) -> list[tuple[Any, ...]]:
    return [(p.job_id, p.user, p.group_id, p.group, p.state, p.currency, p.on_bill, p.footprint, p.cost) for p in parts]


def _line_from_rows(job_ids: list[int], start: datetime, end: datetime) -> Footprint:
    """A line's figures read from its jobs' rows at once: each summed exactly, then a float."""
    sums = JobGpuHour.objects.filter(job_id__in=job_ids, hour__gte=start, hour__lt=end).aggregate(**footprint_sums())
    return Footprint.from_sums(sums)


@pytest.mark.parametrize("period", sorted(PERIODS))
def test_each_jobs_part_and_the_splits_are_those_of_its_rows(world: JobDaysWorld, period: str) -> None:
    start, end = PERIODS[period]
    # given a job with rows in the period though last seen before it, and one excluded from the bill
    Job.objects.filter(pk=world.jobs["slurm/other"].pk).update(last_seen=START + 9 * HOUR)
    decisions.job_exclude(actor=world.admin, job=world.jobs["slurm/short"], exclude=True, reason="a test")
    reference = _reference(world, world.vision, start, end)
    # when the team's period is summed in the database
    parts = team_parts_all(user=world.member, team=world.vision, start=start, end=end)
    found = team_period_sums(user=world.member, team=world.vision, start=start, end=end, top=3)
    # then each job's part is its rows', to the last bit, in the list's order
    assert _fields(parts) == _fields(reference)
    if start <= START + 30 * HOUR < end:  # (the job seen with no row is listed, with nothing in the period)
        assert {p.job_id: p.footprint for p in parts}[world.jobs["slurm/empty"].pk] == Footprint()
    # and each line has the splits' jobs and booked cost, and its jobs' rows summed at once
    expected = team_breakdowns(reference)
    for lines, of_line, key in ((found.breakdowns.by_user, expected.by_user, "user"),
                                (found.breakdowns.by_group, expected.by_group, "group")):  # fmt: skip
        assert [(x.key, x.label, x.jobs, x.cost) for x in lines] == [(x.key, x.label, x.jobs, x.cost) for x in of_line]
        for line in lines:
            ids = [
                p.job_id
                for p in reference
                if p.on_bill
                and (p.user if key == "user" else ("" if p.group_id is None else str(p.group_id))) == line.key
            ]
            assert line.footprint == _line_from_rows(ids, start, end)  # fmt: skip
    assert found.breakdowns.total.cost == bill_of(reference).cost
    # and the costliest jobs that ran (their whole run's cost), each with its part, and their sources
    ran = team_ran_jobs(user=world.admin, team=world.vision, start=start, end=end)
    ran.sort(key=lambda j: (-j.cost, j.pk))
    inside = {p.job_id: p.footprint for p in reference}
    assert found.top == [(j.pk, inside[j.pk]) for j in ran[:3]]
    assert found.sources == sorted({j.intensity_source for j in ran} - {""})


@pytest.mark.parametrize("period", sorted(PERIODS))
def test_the_job_list_is_the_filtered_parts_a_page_at_a_time(world: JobDaysWorld, period: str) -> None:
    start, end = PERIODS[period]
    reference = _reference(world, world.vision, start, end)
    for chosen in (JobFilter(), JobFilter(user="bob"), JobFilter(group=NO_GROUP), JobFilter(group=str(world.group.pk)),
                   JobFilter(state="unknown"), JobFilter(user="nobody")):  # fmt: skip
        shown = [p for p in reference if chosen.keeps(p)]
        pages = [team_jobs_listed(user=world.member, team=world.vision, start=start, end=end, chosen=chosen, page=n,
                                  per_page=2) for n in (1, 2, 3, 4)]  # fmt: skip
        # then each page is the next two of the filtered parts, with their count and the bill of those on it
        assert [_fields(listed.parts) for listed in pages] == [_fields(shown[i : i + 2]) for i in (0, 2, 4, 6)]
        bill = bill_of(shown)
        for listed in pages:
            assert (listed.count, listed.shown_bill.jobs, listed.shown_bill.cost) == (len(shown), bill.jobs, bill.cost)
            assert listed.shown_bill.footprint.gpu_hours == pytest.approx(bill.footprint.gpu_hours, rel=1e-12)
            # and the filters' choices are every part's, whatever is filtered
            assert listed.users == sorted({p.user for p in reference})
            assert listed.states == {p.state for p in reference}
            groups = {(str(p.group_id), p.group) for p in reference if p.group_id}
            assert listed.groups == sorted(groups, key=lambda g: g[1])
            assert listed.currency == ",".join(sorted({p.currency for p in reference if p.currency}))


def test_a_period_past_retention_reads_its_days_kept_costs(world: JobDaysWorld) -> None:
    # given the days of the long run's first day gone past retention, its cost kept (as hour_rows_expire leaves it)
    long = world.jobs["slurm/long"]
    day = DAYS[0]
    cost = sum((r.cost for r in JobGpuHour.objects.filter(job=long, hour__lt=MIDNIGHT + timedelta(days=1))), Decimal(0))
    ExpiredJobDay.objects.create(job=long, cluster=long.cluster, day=day, cost=cost)
    JobGpuHour.objects.filter(job=long, hour__lt=MIDNIGHT + timedelta(days=1)).delete()
    JobDay.objects.filter(job=long, day=day).delete()
    start, end = PERIODS["whole days"]
    # then its part is the rest of its rows and that day's cost, as the API reads it
    parts = {p.job_id: p for p in team_parts_all(user=world.member, team=world.vision, start=start, end=end)}
    assert parts[long.pk].footprint == jobs_in_period_footprints(job_ids=[long.pk], start=start, end=end)[long.pk]
    assert _fields(list(parts.values())) == _fields(_reference(world, world.vision, start, end))


def test_another_teams_member_reads_nothing_of_the_team(world: JobDaysWorld) -> None:
    outsider = UserFactory(username="nlp-member")
    TeamMembershipFactory(user=outsider, team=world.nlp)
    start, end = PERIODS["whole days"]
    assert team_parts_all(user=outsider, team=world.vision, start=start, end=end) == []
    found = team_period_sums(user=outsider, team=world.vision, start=start, end=end, top=3)
    assert (found.breakdowns.by_user, found.top, found.sources) == ([], [], [])
    listed = team_jobs_listed(user=outsider, team=world.vision, start=start, end=end, chosen=JobFilter(), page=1,
                              per_page=50)  # fmt: skip
    assert (listed.parts, listed.count) == ([], 0)


def test_a_period_is_read_as_its_whole_days_and_the_hours_it_cuts() -> None:
    whole = team_period_bounds(start=MIDNIGHT, end=MIDNIGHT + timedelta(days=2))
    assert (whole.first, whole.after, whole.cuts) == (DAYS[0], DAYS[0] + timedelta(days=2), ())
    cut = team_period_bounds(start=START, end=MIDNIGHT + timedelta(days=2, hours=3))
    assert (cut.first, cut.after) == (DAYS[0] + timedelta(days=1), DAYS[0] + timedelta(days=2))
    assert cut.cuts == ((START, MIDNIGHT + timedelta(days=1)), (MIDNIGHT + timedelta(days=2),
                                                                 MIDNIGHT + timedelta(days=2, hours=3)))  # fmt: skip
    inside = team_period_bounds(start=START, end=START + 2 * HOUR)
    assert (inside.first == inside.after, inside.cuts) == (True, ((START, START + 2 * HOUR),))
    assert (inside.expired_first, inside.expired_after) == (DAYS[0] + timedelta(days=1), DAYS[0])
