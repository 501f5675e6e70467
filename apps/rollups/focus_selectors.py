"""What the FOCUS export reads (apps/rollups/focus.py turns it into rows): the teams' daily sums of a month and
the rollups' booked cost of each team-day, for the teams the user may see (a member: their teams; finance and
admins: every team); and the clusters' idle lines of the month, for those who see every team only."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import DateTimeField, F, Q, Sum
from django.db.models.functions import Cast, TruncDay

from apps.core.access.policy import user_sees_all_teams
from apps.core.units.footprint import S_PER_HOUR
from apps.core.units.money import split_rounded
from apps.fleet.models import Team
from apps.jobs.models import ExpiredJobDay, JobGpuHour

from .focus import (
    ClusterIdleDay,
    FocusNames,
    TeamClusterDay,
    allocation_apply,
    focus_rows,
    month_bounds,
    origin_totals,
    unallocated_rows,
)
from .models import ClusterDay, TeamDay
from .selectors import CLUSTER_DAY_IDLE_COLUMNS, cluster_day_idle_line

User = AbstractBaseUser | AnonymousUser


def focus_names() -> FocusNames:
    return FocusNames(
        billing_account_id=settings.FLEETWATT_FOCUS_BILLING_ACCOUNT_ID,
        billing_account_name=settings.FLEETWATT_FOCUS_BILLING_ACCOUNT_NAME,
        invoice_issuer_name=settings.FLEETWATT_FOCUS_INVOICE_ISSUER_NAME,
        provider_name=settings.FLEETWATT_FOCUS_PROVIDER_NAME,
        publisher_name=settings.FLEETWATT_FOCUS_PUBLISHER_NAME,
    )


def _currency(code: str | None) -> str:
    # A cluster without a site has no price of its own: its GPU-hours are billed in the default currency.
    return code or settings.FLEETWATT_FOCUS_DEFAULT_CURRENCY


def focus_team_days(*, user: User, month: date) -> list[TeamClusterDay]:
    """The month's daily sums (TeamDay: jobs excluded from their team's bill left out) of the teams the user
    may see, with each cluster's site: name, currency, price and intensity basis, in one query."""
    start, end = month_bounds(month)
    days = TeamDay.objects.filter(
        team__in=Team.objects.visible_to(user), day__gte=start.date(), day__lt=end.date()
    ).values_list(
        "team_id", "team__name", "cluster__name", "day", "cluster__site__name", "cluster__site__currency",
        "cluster__site__electricity_price_per_kwh", "cluster__site__grid_zone", "cluster__site__intensity_basis",
        "occupancy_s", "energy_j", "facility_kwh", "operational_kg", "embodied_kg", "cost", "energy_by_method_j",
    )  # fmt: skip
    out = []
    for row in days.iterator():
        team_id, team, cluster, day, site, currency, price, zone, basis = row[:9]
        occupancy_s, energy_j, facility_kwh, operational_kg, embodied_kg, cost, by_method = row[9:]
        out.append(
            TeamClusterDay(
                team_id=team_id,
                team=team,
                cluster=cluster,
                day=day,
                currency=_currency(currency),
                gpu_hours=occupancy_s / S_PER_HOUR,
                energy_j=energy_j,
                facility_kwh=facility_kwh,
                operational_kg=operational_kg,
                embodied_kg=embodied_kg,
                cost=cost,
                price_per_kwh=price if price is not None else Decimal(0),
                site=site,
                intensity_basis=basis if zone else None,
                energy_by_method_j=by_method,
            )
        )
    return out


def focus_targets(*, user: User, month: date) -> dict[tuple[int, date, str], Decimal]:
    """Each team-day's booked cost per currency, in its minor unit, as the team's daily rollup books it
    (team_job_costs_minor): each job's cost in the month rounded half-even and split over its days by largest
    remainder, the parts summed per team and day. One query for every team the user may see."""
    start, end = month_bounds(month)
    billed = Q(job__team__in=Team.objects.visible_to(user), job__excluded_from_bill=False)
    hours = (
        JobGpuHour.objects.filter(billed, hour__gte=start, hour__lt=end)
        .annotate(day=TruncDay("hour"), site_currency=F("gpu__node__cluster__site__currency"))
        .values("job_id", "job__team_id", "day", "site_currency")
        .annotate(c=Sum("cost"))
        .order_by()
    )
    expired_days = (  # the days whose hour rows were dropped past retention
        ExpiredJobDay.objects.filter(billed, day__gte=start.date(), day__lt=end.date())
        .annotate(day_start=TruncDay(Cast("day", DateTimeField())), site_currency=F("cluster__site__currency"))
        .values("job_id", "job__team_id", "day_start", "site_currency")
        .annotate(c=Sum("cost"))
        .order_by()
    )
    per_job: dict[tuple[int, int, str], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for r in hours.union(expired_days, all=True):
        key = (r["job_id"], r["job__team_id"], _currency(r["site_currency"]))
        per_job[key][r["day"].date().isoformat()] += r["c"] or Decimal(0)
    out: dict[tuple[int, date, str], Decimal] = defaultdict(Decimal)
    for (_, team_id, currency), parts in per_job.items():
        for day, amount in split_rounded(parts, currency).items():
            out[(team_id, date.fromisoformat(day), currency)] += amount
    return dict(out)


def _sees_every_team(user: User) -> bool:
    # (A request's user is an AbstractUser or anonymous; the selectors' User type is wider.)
    return user_sees_all_teams(user)  # type: ignore[arg-type]


def focus_cluster_idle_days(*, user: User, month: date) -> list[ClusterIdleDay]:
    """Each cluster's idle line and its part nobody saw on each day of the month, from its daily sums (as its
    daily rollup has them), with its site's currency, price and intensity basis, in one query. Cluster-level
    figures, no team's: only for a user who sees every team (admins, finance), none for anyone else."""
    if not _sees_every_team(user):
        return []
    start, end = month_bounds(month)
    site_columns = ("cluster__name", "cluster__site__name", "cluster__site__currency",
                    "cluster__site__electricity_price_per_kwh", "cluster__site__grid_zone",
                    "cluster__site__intensity_basis")  # fmt: skip
    days = ClusterDay.objects.filter(day__gte=start.date(), day__lt=end.date()).values(
        "day", *site_columns, *CLUSTER_DAY_IDLE_COLUMNS
    )
    out = []
    for row in days.order_by("day", "cluster__name").iterator():
        line = cluster_day_idle_line(row)
        if line is None:
            continue
        price, zone = row["cluster__site__electricity_price_per_kwh"], row["cluster__site__grid_zone"]
        out.append(
            ClusterIdleDay(
                cluster=row["cluster__name"],
                day=row["day"],
                currency=_currency(row["cluster__site__currency"]),
                idle=line.idle,
                unseen=line.unseen,
                price_per_kwh=price if price is not None else Decimal(0),
                site=row["cluster__site__name"],
                intensity_basis=row["cluster__site__intensity_basis"] if zone else None,
            )
        )
    return out


def focus_file_rows(*, user: User, month: date) -> list[dict[str, Any]]:
    """The month's FOCUS rows as the user may read them: the teams' rows of the teams they may see, then, for
    whoever sees every team, the clusters' unallocated rows (idle, unobserved), with FOCUS 1.3's allocation
    columns; the ratios only for whoever sees every team (they need each origin charge's whole: every team's rows
    and the unallocated ones)."""
    names = focus_names()
    rows = [
        *focus_rows(focus_team_days(user=user, month=month), focus_targets(user=user, month=month),
                    month=month, names=names),
        *unallocated_rows(focus_cluster_idle_days(user=user, month=month), month=month, names=names),
    ]  # fmt: skip
    return list(allocation_apply(rows, origin_totals(rows) if _sees_every_team(user) else None))
