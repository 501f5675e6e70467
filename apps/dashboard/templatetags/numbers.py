"""The pages' number formats, the weekly report's own (apps.reports.formatting): thousands grouped with commas,
money to the cent, quantities to a fixed number of decimals.

    {% load numbers %}
    {{ job.energy_kwh|qty:3 }} kWh (GPU)    {{ job.cost|billed:job.currency }} {{ job.currency }}
    {{ hour.device_energy_j|joules }} (with its unit)    {{ row.energy_j|qty_kwh }} (the header says kWh)
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

from apps.core.access.policy import user_sees_all_teams
from apps.core.units.money import round_minor
from apps.reports import formatting

register = template.Library()

for _name in ("money", "qty", "pct", "ratio_pct", "words"):
    register.filter(_name, getattr(formatting, _name))

_J_PER_KWH = 3.6e6


@register.filter
def qty_kwh(value: Any, decimals: int = 3) -> str:
    """Joules as the kWh a person reads: 2160000 -> '0.600' (the column's header says kWh); '' for no value."""
    if value is None or value == "":
        return ""
    return formatting.qty(float(value) / _J_PER_KWH, decimals)


@register.filter
def joules(value: Any) -> str:
    """Joules with their unit, as a person reads them: 2160000 -> '0.600 kWh'; '' for no value."""
    shown = qty_kwh(value)
    return f"{shown} kWh" if shown else ""


@register.filter
def sees_all_teams(user: Any) -> bool:
    """Admins and finance (apps.core.access.policy): the fleet's GPU pages and API tokens are theirs."""
    return bool(getattr(user, "is_authenticated", False)) and user_sees_all_teams(user)


@register.filter
def billed(value: Any, currency: str = "") -> str:
    """An amount as it is booked: rounded half-even to the currency's minor unit (apps.core.units.money), so a job's
    cost reads as in /api/jobs/ and the figures that add it up, its thousands grouped as every figure's;
    '' for no value."""
    if value is None or value == "":
        return ""
    return f"{round_minor(Decimal(str(value)), currency or ''):,}"
