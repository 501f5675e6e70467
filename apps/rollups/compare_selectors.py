"""The teams the user may see side by side over a period (whole UTC days, from their daily sums, as their rollups):
each team's totals with its cost in minor units (`teams_compared`, the teams compared of the fleet page, the API
and finance's CSV), and each team's GPU energy per day and split method (`team_daily_energy`)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from apps.core.units.aggregates import footprint_sums
from apps.core.units.footprint import Footprint, kwh
from apps.core.units.money import minor_units
from apps.fleet.models import Team

from .cost_selectors import team_totals_costs_minor
from .models import TeamDay
from .ranges import DAY_SUM_COLUMNS, day_after

User = AbstractBaseUser | AnonymousUser


def team_daily_energy(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """GPU energy per whole UTC day, team and split method (J, and kWh beside it), for the teams the user may
    see: from the teams' daily sums, as their rollups, so jobs an admin excluded from a team's bill are not on it."""
    per_key: dict[tuple[str, str, str], float] = defaultdict(float)
    days = TeamDay.objects.filter(
        team__in=Team.objects.visible_to(user), day__gte=start.date(), day__lt=day_after(end)
    ).values_list("day", "team__name", "energy_by_method_j")
    for day, team, by_method in days:
        for method, joules in by_method.items():
            per_key[(day.isoformat(), team, method)] += joules
    return [
        {"day": day, "team": team, "method": method, "energy_j": joules, "energy_kwh": kwh(joules)}
        for (day, team, method), joules in sorted(per_key.items())
    ]


def team_totals(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Each team the user may see, side by side over the period (whole UTC days, as its rollup): GPU-hours,
    energy, cost and CO2e, from the teams' daily sums in one read. A team whose days span sites on different
    intensity bases is left out (its rollup refuses to mix them)."""
    days = TeamDay.objects.filter(team__in=Team.objects.visible_to(user), day__gte=start.date(), day__lt=day_after(end))
    sums = {
        r["team_id"]: r for r in days.values("team_id").annotate(**footprint_sums(columns=DAY_SUM_COLUMNS)).order_by()
    }
    bases: dict[int, set[str]] = defaultdict(set)
    currencies: dict[int, set[str]] = defaultdict(set)  # as the team's rollup names its `currency` (clusters_basis)
    zoned = days.filter(cluster__site__isnull=False).exclude(cluster__site__grid_zone="")
    site = ("team_id", "cluster__site__intensity_basis", "cluster__site__currency")
    for team_id, basis, currency in zoned.values_list(*site).distinct().order_by():
        bases[team_id].add(basis)
        currencies[team_id].add(currency)
    out = []
    teams = Team.objects.filter(pk__in=list(sums)).order_by("name").values_list("pk", "name", "display_name")
    for team_id, name, display_name in teams:
        if len(bases[team_id]) > 1:
            continue
        total = Footprint.from_sums(sums[team_id])
        out.append(
            {
                "team": name,
                "display_name": display_name or name,
                "currency": ",".join(sorted(currencies[team_id])),
                "gpu_hours": total.gpu_hours,
                "energy_j": total.energy_j,
                "facility_kwh": total.facility_kwh,
                "operational_kg": total.operational_kg or 0.0,
                "embodied_kg": total.embodied_kg,
                "cost": str(total.cost),
            }
        )
    return out


def teams_compared(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """team_totals with kWh beside J and each team's cost in minor units (`cost`: the sum of its jobs' rounded
    costs, as its rollup's `totals.cost` over the same days) beside the exact one (`cost_exact`), as text. After
    them (issue 35, for finance's CSV): the team's display name and currency, the days summed (`period_start`,
    `period_end`, exclusive) and the cost as a whole number of the currency's minor units (`cost_minor`)."""
    teams = team_totals(user=user, start=start, end=end)
    minor = team_totals_costs_minor(user=user, start=start, end=end)
    first, after = start.astimezone(UTC).date(), day_after(end)
    out = []
    for t in teams:
        names = {"display_name": t.pop("display_name"), "currency": t.pop("currency")}
        cost = minor.get(t["team"], Decimal("0.00"))
        out.append(
            {
                **t,
                "energy_kwh": kwh(t["energy_j"]),
                "cost": str(cost),
                "cost_exact": t["cost"],
                **names,
                "period_start": first.isoformat(),
                "period_end": after.isoformat(),
                "cost_minor": minor_units(cost, names["currency"]),
            }
        )
    return out
