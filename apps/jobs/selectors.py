"""Reads of jobs for the API and the dashboards (aggregated in the database, scoped through
Job.objects.visible_to)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Sum
from django.db.models.functions import TruncDay

from apps.carbon.selectors import MixedBasisError, team_rollup_cached
from apps.fleet.models import Team
from apps.jobs.models import Job, JobGpuHourEnergy

User = AbstractBaseUser | AnonymousUser


def team_daily_energy(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """GPU energy per day, team and split method (J), for the jobs the user may see."""
    jobs = Job.objects.visible_to(user)
    rows = (
        JobGpuHourEnergy.objects.filter(job__in=jobs, hour__gte=start, hour__lt=end)
        .annotate(day=TruncDay("hour"))
        .values("day", "job__team__name", "method")
        .annotate(energy_j=Sum("energy_j"))
        .order_by("day", "job__team__name", "method")
    )
    return [
        {
            "day": r["day"].date().isoformat(),
            "team": r["job__team__name"],
            "method": r["method"],
            "energy_j": r["energy_j"],
        }
        for r in rows
    ]


def low_coverage_jobs(*, user: User, start: datetime, end: datetime, threshold: float) -> list[Job]:
    """Jobs in the period whose coverage is under the threshold, worst first."""
    return list(
        Job.objects.visible_to(user)
        .filter(start__lt=end, coverage__lt=threshold, sampled_s__gt=0)
        .exclude(end__lt=start)
        .select_related("team", "cluster")
        .order_by("coverage", "id")
    )


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
