"""apps.core.units.money (pure): minor units per currency, half-even rounding, and the largest-remainder split that
keeps a job's parts adding up to its rounded cost. (Here beside the rollups that use it; it mirrors
apps/core/units/money.py and belongs in tests/core/.)"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.core.units.money import minor_exponent, minor_units, money_text, round_minor, split_rounded


@pytest.mark.parametrize(
    ("currency", "places"), [("EUR", 2), ("usd", 2), ("JPY", 0), ("KWD", 3), ("", 2), ("XYZ", 2), ("EUR,JPY", 2)]
)
def test_minor_exponent_is_iso_4217s(currency: str, places: int) -> None:
    assert minor_exponent(currency) == places


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [
        ("0.125000", "EUR", "0.12"),  # half to even
        ("0.135000", "EUR", "0.14"),
        ("0.125001", "EUR", "0.13"),
        ("1234.5", "JPY", "1234"),
        ("1235.5", "JPY", "1236"),
        ("8936.316", "EUR", "8936.32"),
        ("0", "EUR", "0.00"),
        ("-0.005", "EUR", "0.00"),  # never "-0.00"
    ],
)
def test_money_text_rounds_half_even_to_the_minor_unit(amount: str, currency: str, text: str) -> None:
    assert money_text(Decimal(amount), currency) == text


@pytest.mark.parametrize(
    ("amount", "currency", "units"),
    [("12.30", "EUR", 1230), ("0.125", "EUR", 12), ("1235.5", "JPY", 1236), ("1.2345", "KWD", 1234),
     ("-0.005", "EUR", 0), ("-2.50", "usd", -250), ("7", "", 700)],
)  # fmt: skip
def test_minor_units_are_a_whole_number_of_the_currencys_minor_unit(amount: str, currency: str, units: int) -> None:
    assert minor_units(Decimal(amount), currency) == units


def test_split_gives_the_left_over_units_to_the_largest_remainders() -> None:
    # 1.333332 over two periods: floors 0.66 + 0.66, one cent left, to the first of the equal remainders
    assert split_rounded({"b": Decimal("0.666666"), "a": Decimal("0.666666")}, "EUR") == {
        "a": Decimal("0.67"),
        "b": Decimal("0.66"),
    }
    assert split_rounded({"x": Decimal("0.004"), "y": Decimal("0.009")}, "EUR") == {
        "x": Decimal("0.00"),
        "y": Decimal("0.01"),
    }
    assert split_rounded({}, "EUR") == {}


amounts = st.decimals(min_value=Decimal(0), max_value=Decimal(10**6), places=6, allow_nan=False)


@given(
    parts=st.dictionaries(st.text(min_size=1, max_size=3), amounts, max_size=12),
    currency=st.sampled_from(["EUR", "JPY", "KWD"]),
)
def test_split_parts_add_up_to_the_rounded_whole_and_stay_within_a_unit(
    parts: dict[str, Decimal], currency: str
) -> None:
    split = split_rounded(parts, currency)
    unit = Decimal(1).scaleb(-minor_exponent(currency))
    assert set(split) == set(parts)
    assert sum(split.values(), Decimal(0)) == round_minor(sum(parts.values(), Decimal(0)), currency)
    assert all(abs(split[k] - parts[k]) < unit for k in parts)
    assert all(split[k] == split[k].quantize(unit) for k in parts)
