"""Money as finance tools book it (pure): amounts rounded to the currency's minor unit, and totals that are
the exact sum of the rounded rows they stand for (docs/api.md, "Money").

Costs are stored to 6 decimal places per job-GPU-hour. An amount is shown rounded half-even (banker's
rounding) to its currency's ISO 4217 exponent (EUR, USD: 2; JPY: 0). A total is the sum of its rows'
rounded amounts, never the rounding of their unrounded sum, so a tool adding the rows gets the total to the
cent; the remainder against the unrounded sum stays visible in `cost_exact`.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from functools import lru_cache

# ISO 4217 exponents that are not 2 (the usual currencies of GPU sites; 2 for every other code).
MINOR_EXPONENTS: dict[str, int] = {
    "BHD": 3,
    "CLP": 0,
    "IQD": 3,
    "ISK": 0,
    "JOD": 3,
    "JPY": 0,
    "KRW": 0,
    "KWD": 3,
    "OMR": 3,
    "TND": 3,
    "VND": 0,
}
DEFAULT_EXPONENT = 2


def minor_exponent(currency: str) -> int:
    """Decimal places of the currency's minor unit (ISO 4217); 2 for an unknown or empty code. A rollup over
    sites in several currencies ("EUR,USD") uses the most places any of them has."""
    codes = [c.strip().upper() for c in currency.split(",") if c.strip()]
    if not codes:
        return DEFAULT_EXPONENT
    return max(MINOR_EXPONENTS.get(c, DEFAULT_EXPONENT) for c in codes)


@lru_cache(maxsize=256)  # a page rounds thousands of jobs' costs in a few currencies
def _minor_unit(currency: str) -> Decimal:
    return Decimal(1).scaleb(-minor_exponent(currency))


def round_minor(amount: Decimal, currency: str) -> Decimal:
    """The amount rounded half-even to the currency's minor unit (always with that many places; never -0)."""
    rounded = Decimal(amount).quantize(_minor_unit(currency), rounding=ROUND_HALF_EVEN)
    return abs(rounded) if rounded.is_zero() else rounded


def from_minor_units(units: int | Decimal, exponent: int) -> Decimal:
    """A whole number of minor units (of a currency with that exponent) as an amount with that many places."""
    unit = Decimal(1).scaleb(-exponent)
    return (Decimal(units) * unit).quantize(unit)


def minor_units(amount: Decimal, currency: str) -> int:
    """The amount as a whole number of the currency's minor units, rounded half-even first: 12.30 EUR -> 1230,
    1235 JPY -> 1235, 1.234 KWD -> 1234."""
    return int(round_minor(amount, currency).scaleb(minor_exponent(currency)))


def money_text(amount: Decimal, currency: str) -> str:
    """The amount as a decimal string in the currency's minor unit ("12.30", "1235" for JPY)."""
    return str(round_minor(amount, currency))


def split_rounded(parts: Mapping[str, Decimal], currency: str) -> dict[str, Decimal]:
    """Exact parts of one amount (a job's cost per period) rounded so that they add up to the rounded whole:
    each part is rounded down to the minor unit and the units left over go, one each, to the parts with the
    largest remainders (ties: the first key in sorted order). Largest-remainder apportionment."""
    if not parts:
        return {}
    unit = Decimal(1).scaleb(-minor_exponent(currency))
    whole = round_minor(sum(parts.values(), Decimal(0)), currency)
    floors = {k: (Decimal(v) / unit).to_integral_value(rounding=ROUND_FLOOR) * unit for k, v in parts.items()}
    # The floors never pass the rounded whole (both are whole minor units, floors <= sum < whole + unit/2),
    # so `left` is 0 or more, and at most the number of parts.
    left = int(((whole - sum(floors.values(), Decimal(0))) / unit).to_integral_value())
    for k in sorted(parts, key=lambda k: (-(Decimal(parts[k]) - floors[k]), k))[:left]:
        floors[k] += unit
    return {k: floors[k].quantize(unit) for k in parts}
