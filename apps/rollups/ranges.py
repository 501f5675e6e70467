"""A rollup's range [start, end) and its periods: the UTC days it holds, the period (day, week, month) each day
is in, and whether the daily sums answer it (whole UTC days, none past retention) or its rows must; what the
rollups (apps.rollups.selectors) and their costs in minor units (apps.rollups.cost_selectors) share."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Q, QuerySet
from django.db.models.functions import TruncDay, TruncMonth, TruncWeek

from apps.carbon.models import JobGroup
from apps.fleet.models import Cluster, Team
from apps.jobs.models import ExpiredJobDay

from .models import ClusterDay, JobGroupDay

# The footprint columns a day's sums keep (they have no server energy).
DAY_SUM_COLUMNS = ("energy_j", "occupancy_s", "facility_kwh", "operational_kg", "embodied_kg", "cost")
TRUNC = {"day": TruncDay, "week": TruncWeek, "month": TruncMonth}


def period_key(value: datetime | date) -> str:
    return (value.date() if isinstance(value, datetime) else value).isoformat()


def period_of(day: date, granularity: str) -> str:
    """The period a UTC day is in, as TRUNC gives it: the day, its week's Monday or its month's first."""
    if granularity == "week":
        day -= timedelta(days=day.weekday())
    elif granularity == "month":
        day = day.replace(day=1)
    return day.isoformat()


def whole_days(start: datetime, end: datetime) -> tuple[date, date] | None:
    """[start, end) as UTC days, where both are midnights (UTC): what daily sums can answer."""
    first, after = start.astimezone(UTC), end.astimezone(UTC)
    if first.time() != time(0) or after.time() != time(0):
        return None
    return first.date(), after.date()


def day_after(end: datetime) -> date:
    """The first day not in [.., end): end's own day when end is midnight, else the next one."""
    day = end.astimezone(UTC).date()
    return day if end.astimezone(UTC).time() == time(0) else day + timedelta(days=1)


def team_billed(team: Team) -> Q:
    """A filter of job rows (JobGpuHour, JobGpuHourEnergy, ExpiredJobDay) to those on the team's bill."""
    return Q(job__team=team, job__excluded_from_bill=False)


def expired_days(jobs: Q, start: datetime, end: datetime) -> QuerySet[ExpiredJobDay]:
    """The jobs' days (`jobs`: a filter of ExpiredJobDay) whose hour rows were dropped past retention, those wholly
    within [start, end) (an expired day is kept whole, so a range that cuts one leaves it out, as its hours)."""
    first, after = start.astimezone(UTC), end.astimezone(UTC).date()
    first_day = first.date() if first.time() == time(0) else first.date() + timedelta(days=1)
    return ExpiredJobDay.objects.filter(jobs, day__gte=first_day, day__lt=after)


def group_day_sums(group: JobGroup, start: datetime, end: datetime) -> QuerySet[JobGroupDay] | None:
    """The group's daily sums of [start, end), where they answer it: whole UTC days, none past retention (whose
    hour rows are gone: a range over them reads what is left, as before the daily sums)."""
    days = whole_days(start, end)
    if days is None or expired_days(Q(job__job_group=group), start, end).exists():
        return None
    return JobGroupDay.objects.filter(job_group=group, day__gte=days[0], day__lt=days[1])


def cluster_day_sums(cluster: Cluster, start: datetime, end: datetime) -> QuerySet[ClusterDay] | None:
    """The cluster's daily sums of [start, end), where they answer it (as group_day_sums)."""
    days = whole_days(start, end)
    if days is None or expired_days(Q(cluster=cluster), start, end).exists():
        return None
    return ClusterDay.objects.filter(cluster=cluster, day__gte=days[0], day__lt=days[1])
