"""A team's period job by job, for its page: the jobs of the period with their part inside it, split by user and by
job group (apps.rollups.breakdown), and filtered and ordered for the page's list and its CSV export.

Each job's part is read as `/api/jobs/?start=&end=` reads it (apps.jobs.selectors.jobs_in_period_footprints: its
rows inside the period, with the cost of its days past retention), and rounded as the bill rounds it, so the jobs on
the bill add up to the team's rollup's `totals.cost` for the same days: the page's headline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from apps.core.units.footprint import Footprint
from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.jobs.selectors import team_period_footprints

from .breakdown import BreakdownLine, JobPart, by_group, by_user, lines_by, lines_total

User = AbstractBaseUser | AnonymousUser

NO_GROUP = "none"  # the group filter's value for the jobs in no group


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


def team_job_parts(
    *,
    user: User,
    team: Team,
    start: datetime,
    end: datetime,
    waste: Mapping[int, Footprint] | None = None,
    ran: list[Any] | None = None,
) -> list[JobPart]:
    """Each of the team's jobs of [start, end) the user may see, with its part inside it, the costliest in the period
    first (then the newest); `waste`: each job's counted waste there (apps.waste.selectors.period_waste's
    `per_job`); `ran`: team_ran_jobs, where the caller read them. The jobs: those that ran in the period and any
    other with rows or days past retention inside it (a scheduler's estimate after the job was last seen, read by
    its id), so that every job the bill counts is listed. A job's part as jobs_in_period_footprints reads it (its
    rows there summed, with the cost of its days past retention wholly inside), for the whole team at once
    (apps.jobs.selectors.team_period_footprints)."""
    if ran is None:
        ran = team_ran_jobs(user=user, team=team, start=start, end=end)
    jobs = {j.pk: j for j in ran}
    inside = team_period_footprints(team=team, start=start, end=end)
    others = sorted(set(inside) - set(jobs))
    if others:
        visible = Job.objects.visible_to(user).filter(team=team, pk__any=others)
        jobs |= {j.pk: j for j in visible.values_list(*RAN_COLUMNS, named=True).order_by()}
    waste = waste or {}
    parts = [
        JobPart(
            job_id=j.pk, user=j.user, group_id=j.job_group_id, group=j.job_group__name or "", state=j.state,
            currency=j.currency, on_bill=not j.excluded_from_bill, footprint=inside.get(j.pk, Footprint()),
            waste=waste.get(j.pk, Footprint()),
        )
        for j in sorted(jobs.values(), key=_newest_first)
    ]  # fmt: skip
    return sorted(parts, key=lambda p: -p.cost)  # (stable: the newest first among equal costs)


def _newest_first(job: Any) -> tuple[bool, float, int]:
    """As ORDER BY start DESC, pk DESC (a job without a start first, as Postgres puts NULLs first going down)."""
    return (job.start is not None, -job.start.timestamp() if job.start is not None else 0.0, -job.pk)


@dataclass(frozen=True)
class Breakdowns:
    """A team's period split by user and by job group; `total`: every job on the bill (both splits add up to it)."""

    by_user: list[BreakdownLine]
    by_group: list[BreakdownLine]
    total: BreakdownLine


def team_breakdowns(parts: list[JobPart]) -> Breakdowns:
    by_user_lines = lines_by(parts, by_user)
    return Breakdowns(by_user=by_user_lines, by_group=lines_by(parts, by_group), total=lines_total(by_user_lines))


@dataclass(frozen=True)
class JobFilter:
    """The job list's filters ("" or None: any): the scheduler's user name, the state, the job group (an id as
    text, or NO_GROUP)."""

    user: str = ""
    state: str = ""
    group: str = ""

    def keeps(self, part: JobPart) -> bool:
        if self.user and part.user != self.user:
            return False
        if self.state and part.state != self.state:
            return False
        if self.group:
            group = NO_GROUP if part.group_id is None else str(part.group_id)
            if group != self.group:
                return False
        return True


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
