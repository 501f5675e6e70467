"""Reads of jobs for the API and the dashboards (aggregated in the database, scoped through
Job.objects.visible_to)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from apps.carbon.models import TeamDay
from apps.carbon.selectors import MixedBasisError, day_after, team_rollup_cached
from apps.fleet.models import Team
from apps.jobs.models import Job

User = AbstractBaseUser | AnonymousUser


def team_daily_energy(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """GPU energy per whole UTC day, team and split method (J), for the teams the user may see: from the
    teams' daily sums, as their rollups, so jobs an admin excluded from a team's bill are not on it."""
    per_key: dict[tuple[str, str, str], float] = defaultdict(float)
    days = TeamDay.objects.filter(
        team__in=Team.objects.visible_to(user), day__gte=start.date(), day__lt=day_after(end)
    ).values_list("day", "team__name", "energy_by_method_j")
    for day, team, by_method in days:
        for method, joules in by_method.items():
            per_key[(day.isoformat(), team, method)] += joules
    return [
        {"day": day, "team": team, "method": method, "energy_j": joules}
        for (day, team, method), joules in sorted(per_key.items())
    ]


def low_coverage_jobs(
    *, user: User, start: datetime, end: datetime, threshold: float, team: Team | None = None
) -> list[Job]:
    """Jobs in the period (of one team, or of every team the user sees) whose coverage is under the
    threshold, worst first."""
    jobs = Job.objects.visible_to(user).filter(start__lt=end, coverage__lt=threshold, sampled_s__gt=0)
    if team is not None:
        jobs = jobs.filter(team=team)
    return list(jobs.seen_since(start).select_related("team", "cluster").order_by("coverage", "id"))


def team_totals(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Each team the user may see, side by side over the period: GPU-hours, energy, cost and CO2e."""
    out = []
    for team in Team.objects.visible_to(user).order_by("name"):
        try:
            periods = team_rollup_cached(team=team, start=start, end=end, granularity="month")["periods"]
        except MixedBasisError:
            continue
        if not periods:
            continue
        out.append(
            {
                "team": team.name,
                "gpu_hours": sum(p["gpu_hours"] for p in periods),
                "energy_j": sum(p["energy_j"] for p in periods),
                "facility_kwh": sum(p["facility_kwh"] for p in periods),
                "operational_kg": sum(p["operational_kg"] for p in periods),
                "embodied_kg": sum(p["embodied_kg"] for p in periods),
                "cost": str(sum((p["cost"] for p in periods), Decimal(0))),
            }
        )
    return out
