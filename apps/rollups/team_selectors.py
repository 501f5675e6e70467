"""A team's period job by job: the jobs of the period with their part inside it (summed in the database,
apps.rollups.team_parts), split by user and by job group (apps.rollups.breakdown), and filtered for a list.

Each job's part is read as `/api/jobs/?start=&end=` reads it (apps.jobs.selectors.jobs_in_period_footprints: its
rows inside the period, with the cost of its days past retention), and rounded as the bill rounds it, so the jobs on
the bill add up to the team's rollup's `totals.cost` for the same days: the page's headline."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from apps.core.units.footprint import Footprint
from apps.fleet.models import Team
from apps.jobs.models import Job, JobGpuHour
from apps.waste.kinds import WASTE_KINDS
from apps.waste.models import Flag

from .breakdown import Breakdowns, JobFilter, JobPart, by_group, by_user, lines_by, lines_total
from .models import JobDay
from .team_parts import team_parts_all, team_period_bounds

User = AbstractBaseUser | AnonymousUser

# What the team page reads of each of the team's jobs that ran in its period (team_ran_jobs), read once.
RAN_COLUMNS = (
    "pk", "start", "user", "job_group_id", "job_group__name", "state", "currency", "excluded_from_bill", "cost",
    "intensity_source",
)  # fmt: skip


def team_ran_jobs(*, user: User, team: Team, start: datetime, end: datetime) -> list[Any]:
    """The team's jobs that ran in [start, end) the user may see (started before its end, seen since its start, as
    the API's `?start=&end=` picks them: index job_team_last_seen), each a row of RAN_COLUMNS (by name), in no
    order: what the team page's lists, waste and breakdowns start from."""
    jobs = Job.objects.visible_to(user).filter(team=team, start__lt=end).seen_since(start)
    return list(jobs.values_list(*RAN_COLUMNS, named=True).order_by())


def with_rows_in(*, team_ids: Collection[int], start: datetime, end: datetime) -> Q:
    """A filter of findings (or anything with a `job`) to those of these teams' jobs with rows in [start, end): the
    only ones that can be worth something there. Their whole days from the jobs' days (JobDay, by team and day: a
    few thousand ids from an index), the hours of a day the period cuts from the rows; not every finding of the fleet
    joined to its job for its days (a probe of the jobs per finding)."""
    bounds = team_period_bounds(start=start, end=end)
    days = JobDay.objects.filter(team_id__in=sorted(team_ids), day__gte=bounds.first, day__lt=bounds.after)
    found = Q(job_id__in=days.values("job_id"))
    for lo, hi in bounds.cuts:
        found |= Q(job_id__in=JobGpuHour.objects.filter(job__team__in=sorted(team_ids), hour__gte=lo, hour__lt=hi)
                   .values("job_id"))  # fmt: skip
    return found


def team_period_findings(*, team: Team, start: datetime, end: datetime) -> QuerySet[Flag]:
    """The waste findings of the team's jobs that ran in [start, end) (as team_ran_jobs picks them) and have rows in
    it (with_rows_in: those of jobs without are worth nothing there)."""
    ran = Q(job__team=team, job__start__lt=end) & (Q(job__last_seen__gte=start) | Q(job__last_seen__isnull=True))
    return Flag.objects.filter(with_rows_in(team_ids=[team.pk], start=start, end=end), ran, kind__in=WASTE_KINDS)


def team_job_parts(
    *, user: User, team: Team, start: datetime, end: datetime, waste: Mapping[int, Footprint] | None = None
) -> list[JobPart]:
    """Each of the team's jobs of [start, end) the user may see, with its part inside it, the costliest in the period
    first (then the newest); `waste`: each job's counted waste there (apps.waste.selectors.period_waste's
    `per_job`). The jobs: those that ran in the period and any other with rows or days past retention inside it (a
    scheduler's estimate after the job was last seen), so that every job the bill counts is listed. A job's part as
    jobs_in_period_footprints reads it (its rows there summed, with the cost of its days past retention wholly
    inside), for the whole team at once (apps.rollups.team_parts)."""
    parts = team_parts_all(user=user, team=team, start=start, end=end)
    if not waste:
        return parts
    return [replace(p, waste=waste[p.job_id]) if p.job_id in waste else p for p in parts]


def team_breakdowns(parts: list[JobPart]) -> Breakdowns:
    by_user_lines = lines_by(parts, by_user)
    return Breakdowns(by_user=by_user_lines, by_group=lines_by(parts, by_group), total=lines_total(by_user_lines))


def parts_filtered(parts: list[JobPart], chosen: JobFilter) -> list[JobPart]:
    return [p for p in parts if chosen.keeps(p)]


def jobs_of_parts(parts: list[JobPart]) -> list[Job]:
    """The parts' jobs in the parts' order, each with its part as `period` (one query)."""
    jobs = Job.objects.filter(pk__in=[p.job_id for p in parts]).select_related("job_group", "cluster").in_bulk()
    out = []
    for part in parts:
        job = jobs[part.job_id]
        job.period = part  # type: ignore[attr-defined]
        out.append(job)
    return out
