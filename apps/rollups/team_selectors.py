"""A team's period job by job: the jobs of the period with their part inside it (summed in the database,
apps.rollups.team_parts), split by user and by job group (apps.rollups.breakdown), and filtered for a list.

Each job's part is read as `/api/jobs/?start=&end=` reads it (apps.jobs.selectors.jobs_in_period_footprints: its
rows inside the period, with the cost of its days past retention), and rounded as the bill rounds it, so the jobs on
the bill add up to the team's rollup's `totals.cost` for the same days: the page's headline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from apps.core.units.footprint import Footprint
from apps.fleet.models import Team
from apps.jobs.models import Job

from .breakdown import Breakdowns, JobFilter, JobPart, by_group, by_user, lines_by, lines_total
from .team_parts import team_parts_all

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


def team_ran_jobs_query(*, team: Team, start: datetime, end: datetime) -> QuerySet[Job]:
    """The ids of the team's jobs that ran in [start, end), as team_ran_jobs picks them: for a subquery (the team
    page's findings are those of these jobs)."""
    return Job.objects.filter(team=team, start__lt=end).seen_since(start).values("pk")


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
