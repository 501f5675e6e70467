"""A team's period job by job, for its page: the jobs of the period with their part inside it, split by user and by
job group (apps.rollups.breakdown), and filtered and ordered for the page's list and its CSV export.

Each job's part is read as `/api/jobs/?start=&end=` reads it (apps.jobs.selectors.jobs_in_period_footprints: its
rows inside the period, with the cost of its days past retention), and rounded as the bill rounds it, so the jobs on
the bill add up to the team's rollup's `totals.cost` for the same days: the page's headline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q

from apps.core.footprint import Footprint
from apps.fleet.models import Team
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour, JobQuerySet
from apps.jobs.selectors import jobs_in_period_footprints

from .breakdown import BreakdownLine, JobPart, by_group, by_user, lines_by, lines_total

User = AbstractBaseUser | AnonymousUser

NO_GROUP = "none"  # the group filter's value for the jobs in no group


def team_period_jobs(*, user: User, team: Team, start: datetime, end: datetime) -> JobQuerySet:
    """The team's jobs of [start, end) the user may see: those that ran in it (started before its end, seen since
    its start, as the team page picks them) and any other with rows or days past retention inside it (a scheduler's
    estimate after the job was last seen), so that every job the bill counts is listed."""
    rows = JobGpuHour.objects.filter(job__team=team, hour__gte=start, hour__lt=end).values("job_id")
    expired = ExpiredJobDay.objects.filter(job__team=team, day__gte=start.date(), day__lt=end.date()).values("job_id")
    ran = Q(start__lt=end) & (Q(last_seen__gte=start) | Q(last_seen__isnull=True))
    return Job.objects.visible_to(user).filter(Q(team=team) & (ran | Q(pk__in=rows) | Q(pk__in=expired)))


def team_job_parts(
    *, user: User, team: Team, start: datetime, end: datetime, waste: Mapping[int, Footprint] | None = None
) -> list[JobPart]:
    """Each of the team's jobs of the period (team_period_jobs) with its part inside it, in two queries (the jobs,
    and their rows' sums), the costliest in the period first (then the newest); `waste`: each job's counted waste
    there (apps.waste.selectors.period_waste's `per_job`)."""
    jobs = list(
        team_period_jobs(user=user, team=team, start=start, end=end)
        .values_list("pk", "user", "job_group_id", "job_group__name", "state", "currency", "excluded_from_bill")
        .order_by("-start", "-pk")
    )
    inside = jobs_in_period_footprints(job_ids=[j[0] for j in jobs], start=start, end=end)
    waste = waste or {}
    parts = []
    for pk, user_name, group_id, group_name, state, currency, excluded in jobs:
        parts.append(
            JobPart(
                job_id=pk, user=user_name, group_id=group_id, group=group_name or "", state=state, currency=currency,
                on_bill=not excluded, footprint=inside.get(pk, Footprint()), waste=waste.get(pk, Footprint()),
            )
        )  # fmt: skip
    return sorted(parts, key=lambda p: -p.cost)  # (stable: the newest first among equal costs)


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
