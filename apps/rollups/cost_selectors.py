"""Money as finance tools book it (docs/api.md, "Money"): each job's cost rounded half-even in its currency's minor
unit, a period's cost the sum of its jobs' rounded costs (a job across periods split by largest remainder, so its
parts add up to its rounded cost), for the team, cluster and job group rollups (apps.rollups.selectors) and the teams
side by side (apps.rollups.compare_selectors). Jobs within one UTC day are read from the daily sums' rounded costs
(`cost_units`), those across days and any range the daily sums do not answer from their rows."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import DateTimeField, F, Q, QuerySet, Sum
from django.db.models.functions import Cast

from apps.carbon.models import JobGroup
from apps.core.units.aggregates import HALF_EVEN_QR, HALF_EVEN_UNITS
from apps.core.units.money import DEFAULT_EXPONENT, MINOR_EXPONENTS, from_minor_units, minor_exponent, split_rounded
from apps.fleet.models import Cluster, Team
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour, JobQuerySet

from .models import TeamDay
from .ranges import (
    TRUNC,
    cluster_day_sums,
    day_after,
    expired_days,
    group_day_sums,
    period_key,
    period_of,
    team_billed,
    whole_days,
)

User = AbstractBaseUser | AnonymousUser


# Each job's cost per period (the ORM query below: from its job-GPU-hours and its days past retention, added up),
# counted per job: a job within one period (nearly all) is rounded here and summed per period in the database; a job
# across periods comes back part by part for split_rounded. Rows: (NULL, period, units) for the jobs within one
# period, (job_id, period, cost) for each part of the others.
_JOB_COSTS_MINOR_SQL = f"""
WITH per AS ({{per_job}}),
counted AS (SELECT job_id, period, COALESCE(c, 0) AS c, count(*) OVER (PARTITION BY job_id) AS periods FROM per),
single AS (SELECT period, (c * 1000000)::bigint AS m, %s::bigint AS d FROM counted WHERE periods = 1),
floored AS (SELECT period, d, {HALF_EVEN_QR} FROM single)
SELECT NULL::bigint, period, SUM({HALF_EVEN_UNITS}) FROM floored GROUP BY period
UNION ALL
SELECT job_id, period, c FROM counted WHERE periods > 1
"""

# Each job's cost over the period with its team and currency (the ORM query below: hours and days past retention,
# added up), rounded in the job's currency (its exponent from the codes passed, DEFAULT_EXPONENT for any other) and
# summed per team and exponent.
_TEAM_COSTS_MINOR_SQL = f"""
WITH per AS ({{per_job}}),
single AS (
    SELECT per.team_name, COALESCE(x.e, %s) AS e, (COALESCE(per.c, 0) * 1000000)::bigint AS m,
           power(10, 6 - COALESCE(x.e, %s))::bigint AS d
    FROM per LEFT JOIN unnest(%s::text[], %s::int[]) AS x(code, e) ON x.code = upper(trim(per.job_currency))
),
floored AS (SELECT team_name, e, d, {HALF_EVEN_QR} FROM single)
SELECT team_name, e, SUM({HALF_EVEN_UNITS}) FROM floored GROUP BY team_name, e
"""


def _job_costs_minor(
    rows: QuerySet[JobGpuHour], expired: QuerySet[ExpiredJobDay], trunc: Any, currency: str
) -> dict[str, Decimal]:
    """Per period, the sum of its jobs' costs in the currency's minor unit: each job's cost over the rows is
    rounded half-even, and split over the periods it ran in by largest remainder (apps.core.money), so a
    job's parts add up to its rounded cost and the periods to the sum of the jobs' rounded costs. Jobs within one
    period are rounded and summed in the database (a team's year is 10^5 jobs; one query either way). `expired`:
    the same jobs' days whose hour rows were dropped past retention (`expired_days`)."""
    exponent = minor_exponent(currency)
    hours = rows.annotate(period=trunc("hour")).values("job_id", "period").annotate(c=Sum("cost"))
    day_start = Cast("day", DateTimeField())
    days = expired.annotate(period=trunc(day_start)).values("job_id", "period").annotate(c=Sum("cost"))
    out: dict[str, Decimal] = defaultdict(Decimal)
    split: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for job_id, period, amount in _per_job_sums(
        _JOB_COSTS_MINOR_SQL, "job_id, period", hours, expired, days, [10 ** (6 - exponent)]
    ):
        if job_id is None:
            out[period_key(period)] += from_minor_units(amount, exponent)
        else:
            split[job_id][period_key(period)] = Decimal(amount)
    for parts in split.values():
        for key, amount in split_rounded(parts, currency).items():
            out[key] += amount
    return dict(out)


def _per_job_sums(
    template: str,
    keys: str,
    hours: QuerySet[Any],
    expired: QuerySet[ExpiredJobDay],
    days: QuerySet[Any],
    params: list[Any],
) -> list[tuple[Any, ...]]:
    """The rows of `template`, whose `{per_job}` is each job's cost `c` per `keys` from `hours` (job-GPU-hours)
    added up with `days` (the same from `expired`, the days past retention), with `params` after the query's own.
    The union and its second sum only when `expired` has a day: most ranges are past no retention. Nothing when a
    filter can match nothing (no team to see)."""
    try:
        if expired.exists():
            union, inner = hours.order_by().union(days.order_by(), all=True).query.sql_with_params()
            sql = f"SELECT {keys}, SUM(c) AS c FROM ({union}) AS parts GROUP BY {keys}"
        else:
            sql, inner = hours.order_by().query.sql_with_params()
    except EmptyResultSet:
        return []
    with connection.cursor() as cursor:
        cursor.execute(template.replace("{per_job}", sql), [*inner, *params])
        return cursor.fetchall()


def team_job_costs_minor(
    *, team: Team, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """team_rollup's job cost per period in minor units (jobs excluded from the bill left out): whole UTC days
    from its daily sums, any other range from its rows in [start, end), as team_rollup."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    billed = team_billed(team)
    days = None
    if whole_days(start, end) is not None:
        days = TeamDay.objects.filter(team=team, day__gte=start.date(), day__lt=day_after(end))
    return _costs_minor(
        days, Job.objects.filter(team=team, excluded_from_bill=False),
        rows=billed, expired=billed, start=start, end=end, granularity=granularity, currency=currency,
    )  # fmt: skip


def _costs_minor(
    days: QuerySet[Any] | None, jobs: JobQuerySet, *, rows: Q, expired: Q, start: datetime, end: datetime,
    granularity: str, currency: str,
) -> dict[str, Decimal]:  # fmt: skip
    """_job_costs_minor of a rollup's jobs (`jobs`; `rows` and `expired`: the same as filters of their job-GPU-hours
    and of their days past retention) over [start, end): from the daily sums `days` where they answer it (None:
    they do not), else every job from its rows."""
    out = None
    if days is not None:
        out = _costs_minor_from_days(days, jobs, first=start, after=end, granularity=granularity, currency=currency)
    if out is None:
        hours = JobGpuHour.objects.filter(rows, hour__gte=start, hour__lt=end)
        out = _job_costs_minor(hours, expired_days(expired, start, end), TRUNC[granularity], currency)
    return out


def _costs_minor_from_days(
    days: QuerySet[Any], jobs: JobQuerySet, *, first: datetime, after: datetime, granularity: str, currency: str
) -> dict[str, Decimal] | None:
    """_job_costs_minor of `jobs` over whole days [first, after): those within one day from the daily sums
    `days` (cost_units), those across days from their rows. None where a day's sum is not known or is in
    another minor unit than `currency`'s (then every job is read from its rows)."""
    exponent = minor_exponent(currency)
    within = _within_day_units(days)
    if within is None or any(e not in (None, exponent) for *_, e in within):
        return None
    across = _jobs_across_days(jobs, first, after)
    rows = JobGpuHour.objects.filter(across, hour__gte=first, hour__lt=after)
    out = defaultdict(Decimal, _job_costs_minor(rows, expired_days(across, first, after), TRUNC[granularity],
                                                currency))  # fmt: skip
    for _, day, units, _ in within:
        out[period_of(day, granularity)] += from_minor_units(units, exponent)
    return dict(out)


def _jobs_across_days(jobs: JobQuerySet, first: datetime, after: datetime) -> Q:
    """A filter of rows to those of the jobs across days in [first, after): their ids read first (few; an array,
    whose length the planner knows, where a subquery of a team list had it read every row of the range)."""
    return Q(job_id__any=list(jobs.across_days(first.date(), after.date()).values_list("pk", flat=True)))


def _within_day_units(days: QuerySet[Any], *, label: str = "pk") -> list[tuple[Any, date, int, int | None]] | None:
    """The days' rounded costs of their jobs within one day, (label, day, units, exponent) per daily sum (`label`:
    a field of it, e.g. its team's name); None where one day's is not known (a job there has no days recorded)
    or in more than one minor unit."""
    rows = list(days.values_list(label, "day", "cost_units", "units_exponent").order_by())
    known = [(name, day, units, e) for name, day, units, e in rows if units is not None and e != -1]
    return known if len(known) == len(rows) else None


def cluster_job_costs_minor(
    *, cluster: Cluster, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """cluster_rollup's job cost per period in minor units (from its daily sums where they answer the range)."""
    return _costs_minor(
        cluster_day_sums(cluster, start, end), Job.objects.filter(cluster=cluster), rows=Q(gpu__node__cluster=cluster),
        expired=Q(cluster=cluster), start=start, end=end, granularity=granularity, currency=currency,
    )  # fmt: skip


def job_group_job_costs_minor(
    *, group: JobGroup, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """job_group_rollup's job cost per period in minor units (from its daily sums where they answer the range)."""
    return _costs_minor(
        group_day_sums(group, start, end), Job.objects.filter(job_group=group), rows=Q(job__job_group=group),
        expired=Q(job__job_group=group), start=start, end=end, granularity=granularity, currency=currency,
    )  # fmt: skip


def team_totals_costs_minor(*, user: User, start: datetime, end: datetime) -> dict[str, Decimal]:
    """team_totals' cost per team name in minor units: the sum of its jobs' costs over the period (whole UTC
    days, jobs excluded from the bill left out), each rounded half-even in its currency: the jobs within one day
    from the teams' daily sums (TeamDay.cost_units), those across days from their rows in one query; every job
    from its rows where a day's sum is not known."""
    first = datetime.combine(start.astimezone(UTC).date(), time(0), tzinfo=UTC)
    after = datetime.combine(day_after(end), time(0), tzinfo=UTC)
    teams = Team.objects.visible_to(user)
    team_days = TeamDay.objects.filter(team__in=teams, day__gte=first.date(), day__lt=after.date())
    within = _within_day_units(team_days, label="team__name")
    if within is None:
        billed = Q(job__team__in=teams, job__excluded_from_bill=False)
    else:
        billed = _jobs_across_days(Job.objects.filter(team__in=teams, excluded_from_bill=False), first, after)
    expired = expired_days(billed, first, after)
    hours, days = (
        rows.values("job_id")
        .annotate(team_name=F("job__team__name"), job_currency=F("job__currency"), c=Sum("cost"))
        .values("job_id", "team_name", "job_currency", "c")
        for rows in (JobGpuHour.objects.filter(billed, hour__gte=first, hour__lt=after), expired)
    )
    codes = sorted(MINOR_EXPONENTS)
    params = [DEFAULT_EXPONENT, DEFAULT_EXPONENT, codes, [MINOR_EXPONENTS[c] for c in codes]]
    out: dict[str, Decimal] = defaultdict(Decimal)
    keys = "job_id, team_name, job_currency"
    for team_name, exponent, units in _per_job_sums(_TEAM_COSTS_MINOR_SQL, keys, hours, expired, days, params):
        out[team_name] += from_minor_units(units, exponent)
    for team_name, _, units, exponent in within or ():
        if exponent is not None:
            out[team_name] += from_minor_units(units, exponent)
    return dict(out)
