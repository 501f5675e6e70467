"""Number formats of the weekly report (pure; templatetags/report_format.py makes them template filters),
the same in the HTML part, the text part and the browser view: money to the cent, quantities to a fixed
number of decimals, thousands grouped with commas."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

CENT = Decimal("0.01")
TEXT_BAR_WIDTH = 30


def money(value: Any) -> str:
    """'1,234.57': half-even to the cent, as apps.core.units.money rounds an amount (an exact figure such as a period's
    waste then reads as the API's `cost` of it, ties included; a rounded amount is shown as it is)."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return ""
    return f"{amount.quantize(CENT, rounding=ROUND_HALF_EVEN):,}"


def qty(value: Any, decimals: int = 2) -> str:
    """'1,234.57' for qty:2; '' for no value."""
    if value is None or value == "":
        return ""
    return f"{float(value):,.{int(decimals)}f}"


def change_pct(change: dict[str, Any]) -> str:
    """'+12.3 %', '-4.0 %', 'new' (nothing last week), 'no change'."""
    if change["pct"] is None:
        return "new" if change["now"] else "no change"
    if abs(change["pct"]) < 0.05:
        return "no change"
    return f"{change['pct']:+.1f} %"


def textbar(day: dict[str, Any]) -> str:
    """A day's bar for the plain-text part: 'x' for waste GPU-hours, '#' for the rest."""
    waste = round(TEXT_BAR_WIDTH * day["waste_pct"] / 100)
    busy = round(TEXT_BAR_WIDTH * day["busy_pct"] / 100)
    return ("x" * waste + "#" * busy).ljust(TEXT_BAR_WIDTH, ".")


def pct(value: Any, decimals: int = 1) -> str:
    if value is None or value == "":
        return ""
    return f"{float(value):.{int(decimals)}f} %"


def ratio_pct(value: Any) -> str:
    """0.8123 -> '81 %'."""
    if value is None or value == "":
        return ""
    return f"{100 * float(value):.0f} %"


def words(value: str) -> str:
    """'idle_allocation' -> 'idle allocation'."""
    return str(value).replace("_", " ")
