"""A team's period job by job (apps/rollups/team_selectors.py): each job's part inside the period, rounded as the bill
rounds it, so the jobs on the bill add up to the team's booked cost for the same days; a job with rows in the period
listed though last seen before it; another team's member sees none of it; the splits by user and by group add up to
the bill; the list's filters; the parts' jobs in their order."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from apps.core.units.footprint import Footprint
from apps.jobs.models import Job
from apps.rollups.breakdown import NO_GROUP, JobFilter, bill_of
from apps.rollups.cost_selectors import team_job_costs_minor
from apps.rollups.team_selectors import (
    jobs_of_parts,
    parts_filtered,
    team_breakdowns,
    team_job_parts,
    team_ran_jobs,
)
from tests.factories import TeamMembershipFactory, UserFactory
from tests.rollups.day_world import END, HOUR, ROW_J, START, T0, DayWorld, day_world_build

pytestmark = pytest.mark.django_db

D = Decimal


@pytest.fixture
def world() -> DayWorld:
    return day_world_build()


@pytest.mark.parametrize(("start", "end"), [(START, END), (START, START + timedelta(days=1)), (START + 24 * HOUR, END)])
def test_the_jobs_on_the_bill_add_up_to_the_teams_booked_cost_for_the_same_days(
    world: DayWorld, start: Any, end: Any
) -> None:
    # when vision's jobs of the period are read with their parts inside it
    parts = team_job_parts(user=world.finance, team=world.vision, start=start, end=end)
    # then the parts on the bill, each rounded, add up to what the team's days book
    booked = team_job_costs_minor(team=world.vision, start=start, end=end, granularity="day", currency="EUR")
    assert bill_of(parts).cost == sum(booked.values())


def test_each_part_is_the_jobs_rows_inside_the_period_costliest_first(world: DayWorld) -> None:
    # when vision's first day is read
    parts = team_job_parts(user=world.finance, team=world.vision, start=START, end=START + timedelta(days=1))
    # then its three jobs, the costliest in the period first; the job across midnight with its first two hours
    by_job = {p.job_id: p for p in parts}
    across, within, excluded = (world.jobs[k].pk for k in ("v-across", "v-within", "v-excluded"))
    assert set(by_job) == {across, within, excluded}
    assert [p.cost for p in parts] == sorted((p.cost for p in parts), reverse=True)
    assert (by_job[across].footprint.energy_j, by_job[across].cost) == (pytest.approx(2 * ROW_J), D("0.67"))
    assert (by_job[within].cost, by_job[within].group, by_job[within].on_bill) == (D("1.00"), "sweeps", True)
    assert by_job[excluded].on_bill is False
    # the waste given for a job is carried on its part
    waste = Footprint(cost=D("0.50"))
    again = team_job_parts(user=world.finance, team=world.vision, start=START, end=END, waste={within: waste})
    assert {p.job_id: p.waste for p in again}[within] == waste


def test_a_job_with_rows_in_the_period_is_listed_though_last_seen_before_it(world: DayWorld) -> None:
    # given the job within day 1 last seen before its last hours' rows (a scheduler's estimate after it)
    within = world.jobs["v-within"]
    Job.objects.filter(pk=within.pk).update(last_seen=T0 + HOUR)
    start = T0 + 2 * HOUR
    # then it did not run in the period as the page picks jobs, yet its rows there are on the list and the bill
    assert within.pk not in {j.pk for j in team_ran_jobs(user=world.finance, team=world.vision, start=start, end=END)}
    parts = {p.job_id: p for p in team_job_parts(user=world.finance, team=world.vision, start=start, end=END)}
    assert parts[within.pk].footprint.energy_j == pytest.approx(2 * ROW_J)


def test_another_teams_member_sees_none_of_the_teams_jobs(world: DayWorld) -> None:
    outsider = UserFactory(username="nlp-member")
    TeamMembershipFactory(user=outsider, team=world.nlp)
    assert team_ran_jobs(user=outsider, team=world.vision, start=START, end=END) == []
    assert team_job_parts(user=outsider, team=world.vision, start=START, end=END) == []
    # and a member of the team sees its jobs, the other team's not among them
    ran = team_ran_jobs(user=world.member, team=world.vision, start=START, end=END)
    assert {j.pk for j in ran} == {world.jobs[k].pk for k in ("v-within", "v-across", "v-excluded")}


def test_the_splits_by_user_and_by_group_add_up_to_the_bill(world: DayWorld) -> None:
    parts = team_job_parts(user=world.finance, team=world.vision, start=START, end=END)
    found = team_breakdowns(parts)
    # each split's lines: the jobs on the bill (the excluded one left out), adding up to the total
    assert found.total.cost == bill_of(parts).cost == D("2.33") and found.total.jobs == 2
    for lines in (found.by_user, found.by_group):
        assert sum(line.cost for line in lines) == found.total.cost
        assert sum(line.jobs for line in lines) == found.total.jobs
    assert [(line.label, line.cost) for line in found.by_user] == [("user-v-across", D("1.33")),
                                                                    ("user-v-within", D("1.00"))]  # fmt: skip
    assert [(line.key, line.label) for line in found.by_group] == [("", ""), (str(world.group.pk), "sweeps")]


def test_the_list_keeps_the_jobs_its_filters_name(world: DayWorld) -> None:
    parts = team_job_parts(user=world.finance, team=world.vision, start=START, end=END)
    keys = {p.job_id: k for k, job in world.jobs.items() for p in parts if p.job_id == job.pk}

    def kept(chosen: JobFilter) -> set[str]:
        return {keys[p.job_id] for p in parts_filtered(parts, chosen)}

    assert kept(JobFilter()) == {"v-within", "v-across", "v-excluded"}
    assert kept(JobFilter(user="user-v-within")) == {"v-within"}
    assert kept(JobFilter(state="failed")) == {"v-across"}
    assert kept(JobFilter(group=str(world.group.pk))) == {"v-within"}
    assert kept(JobFilter(group=NO_GROUP)) == {"v-across", "v-excluded"}
    assert kept(JobFilter(state="completed", group=NO_GROUP)) == {"v-excluded"}
    assert kept(JobFilter(user="nobody")) == set()


def test_the_parts_jobs_come_in_the_parts_order_with_their_part(
    world: DayWorld, django_assert_num_queries: Any
) -> None:
    parts = team_job_parts(user=world.finance, team=world.vision, start=START, end=END)
    with django_assert_num_queries(1):
        jobs = jobs_of_parts(parts)
    assert [j.pk for j in jobs] == [p.job_id for p in parts]
    assert all(j.period is p for j, p in zip(jobs, parts, strict=True))
