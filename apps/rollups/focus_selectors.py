"""What the FOCUS export reads (apps/rollups/focus.py turns it into rows): the teams' daily sums of a month and
the rollups' booked cost of each team-day, for the teams the user may see (a member: their teams; finance and
admins: every team)."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from decimal import Decimal

from django.conf import settings
from django.db.models import DateTimeField, F, Q, Sum
from django.db.models.functions import Cast, TruncDay

from apps.core.footprint import S_PER_HOUR
from apps.core.money import split_rounded
from apps.fleet.models import Team
from apps.jobs.models import ExpiredJobDay, JobGpuHour

from .focus import FocusNames, TeamClusterDay, month_bounds
from .models import TeamDay
from .selectors import User


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
