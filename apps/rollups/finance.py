"""A rollup as finance tools book it (docs/api.md, "Money"): kWh beside J, each period's cost in the currency's
minor unit beside the exact one, and a totals line whose cost is the sum of the periods'. Pure functions."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apps.core.units.footprint import kwh
from apps.core.units.money import round_minor

_SUMMED = ("energy_j", "gpu_hours", "facility_kwh", "operational_kg", "embodied_kg")


def _line(figures: dict, *, exact: Decimal, minor: Decimal) -> dict:
    """A line's figures with kWh beside J, its cost in the currency's minor unit and its exact cost."""
    return {**figures, "energy_kwh": kwh(figures["energy_j"]), "cost": minor, "cost_exact": exact}


def _lines_added(lines: list[dict], zero: Decimal) -> dict:
    """Lines added up: their costs in minor units summed (not the exact sum rounded)."""
    figures = {k: sum((line[k] for line in lines), 0.0) for k in _SUMMED}
    exact = sum((line["cost_exact"] for line in lines), Decimal(0))
    return _line(figures, exact=exact, minor=sum((line["cost"] for line in lines), zero))


def _waste_added(lines: list[dict], currency: str) -> dict:
    """Waste lines added up: waste is no bill, so its cost is the exact sum rounded once, as the team page and
    the weekly report show a period's waste (the periods' rounded costs may add up to a unit or so apart)."""
    figures = {k: sum((line[k] for line in lines), 0.0) for k in _SUMMED}
    exact = sum((line["cost_exact"] for line in lines), Decimal(0))
    return _line(figures, exact=exact, minor=round_minor(exact, currency))


# A period's keys added after the first ones (issue 34): kept at the end of each period, so that the CSV's new
# columns come after the old ones.
_APPENDED = ("waste", "energy_low_j", "energy_high_j")
BAND_KEYS = ("energy_low_j", "energy_high_j", "energy_low_kwh", "energy_high_kwh")


def _band(low_j: float | None, high_j: float | None) -> dict:
    """The interval of a line's energy in J and kWh (None where it is not known)."""
    return {
        "energy_low_j": low_j, "energy_high_j": high_j,
        "energy_low_kwh": None if low_j is None else kwh(low_j),
        "energy_high_kwh": None if high_j is None else kwh(high_j),
    }  # fmt: skip


def _band_total(values: list[float | None]) -> float | None:
    """The periods' interval ends added up (a sum's interval adds its parts'); None once one is not known."""
    return None if any(v is None for v in values) else sum((v for v in values if v is not None), 0.0)


def for_finance(doc: dict, costs_minor: dict[str, Decimal]) -> dict:
    """The rollup with kWh beside J, costs in the currency's minor unit (`cost`) and exact (`cost_exact`), and
    a totals line: a period's `cost` is the sum of its jobs' rounded costs (`costs_minor`), an idle line's (and
    its `unobserved` part's) its own cost rounded, the totals' the sum of the periods' (docs/api.md, "Money"). A
    team's waste line has its own cost rounded, in each period and in the totals (`_waste_added`). Each period's
    and the totals' energy interval last, in J and kWh (the totals': the periods' added up)."""
    currency = doc["currency"]
    zero = round_minor(Decimal(0), currency)
    periods: list[dict] = []
    lines: dict[str, list[dict]] = {"idle": [], "unobserved": [], "waste": []}
    for p in doc["periods"]:
        added = {}
        for name, found in lines.items():  # the idle line, the part of it nobody saw, and a team's waste
            line = p.get(name)
            if line is not None:
                line = _line(line, exact=line["cost"], minor=round_minor(line["cost"], currency))
                found.append(line)
            added[name] = line
        minor = round_minor(costs_minor.get(p["period"], zero), currency)
        first = {k: v for k, v in p.items() if k not in _APPENDED}
        band = _band(p.get("energy_low_j"), p.get("energy_high_j"))
        periods.append({**_line(first, exact=p["cost"], minor=minor), **added, **band})
    totals = _lines_added(periods, zero)
    for name, found in lines.items():
        if name == "waste":
            totals[name] = _waste_added(found, currency) if found else None
        else:
            totals[name] = _lines_added(found, zero) if found else None
    totals |= _band(*(_band_total([p[k] for p in periods]) for k in ("energy_low_j", "energy_high_j")))
    return {**doc, "periods": periods, "totals": totals}


def money_as_text(value: Any) -> Any:
    """Decimals as exact text, as DRF's DecimalField writes them (its JSON encoder would make floats)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: money_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [money_as_text(v) for v in value]
    return value


CSV_PLACES = 6  # a CSV's quantities (GPU-hours, kWh, kg): a millionth is far below what any meter reads


def csv_quantity(value: float | None, places: int = CSV_PLACES) -> float | None:
    """A quantity as a CSV writes it: rounded to `places` decimals, so a float's binary noise (12.000000000000002)
    is not written; None stays None (an empty cell)."""
    if value is None:
        return None
    return round(value, places) + 0.0  # (+ 0.0: never "-0.0")
