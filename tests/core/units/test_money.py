"""apps.core.units.money (pure): amounts in their currency's minor unit. The rounding and the largest-remainder split
are also tested beside the rollups that use them (tests/rollups/test_money.py); here, what a finance tool relies on
when it reads the API's money back: minor units and amounts convert both ways without a unit lost, every amount has
its currency's places, and a split of a job's cost never moves money from one part to another by more than a unit."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.core.units.money import (
    DEFAULT_EXPONENT,
    MINOR_EXPONENTS,
    from_minor_units,
    minor_exponent,
    minor_units,
    money_text,
    round_minor,
    split_rounded,
)

CURRENCIES = ["EUR", "USD", "JPY", "KRW", "KWD", "BHD", "CHF"]


def test_every_exponent_listed_is_one_iso_4217_uses_and_not_the_default() -> None:
    assert set(MINOR_EXPONENTS.values()) <= {0, 3}
    assert all(code.isascii() and code.isupper() and len(code) == 3 for code in MINOR_EXPONENTS)
    assert DEFAULT_EXPONENT == 2


@pytest.mark.parametrize(
    ("currency", "places"),
    [(" jpy ", 0), ("EUR, KWD", 3), ("JPY,EUR", 2), (",,", 2), ("JPY,", 0), ("kwd,jpy,eur", 3)],
)
def test_a_rollup_over_several_currencies_uses_the_most_places_any_has(currency: str, places: int) -> None:
    assert minor_exponent(currency) == places


@pytest.mark.parametrize(
    ("units", "exponent", "amount"),
    [(1230, 2, "12.30"), (1235, 0, "1235"), (1234, 3, "1.234"), (0, 2, "0.00"), (-250, 2, "-2.50"), (5, 3, "0.005")],
)
def test_minor_units_as_an_amount_with_the_currencys_places(units: int, exponent: int, amount: str) -> None:
    value = from_minor_units(units, exponent)
    assert str(value) == amount
    assert value.as_tuple().exponent == -exponent


@given(
    units=st.integers(min_value=-(10**15), max_value=10**15),
    currency=st.sampled_from(CURRENCIES),
)
def test_minor_units_and_amounts_convert_both_ways_without_loss(units: int, currency: str) -> None:
    amount = from_minor_units(units, minor_exponent(currency))
    assert minor_units(amount, currency) == units
    assert round_minor(amount, currency) == amount
    assert money_text(amount, currency) == str(amount)


@given(
    amount=st.decimals(min_value=Decimal("-1e9"), max_value=Decimal("1e9"), places=6, allow_nan=False),
    currency=st.sampled_from(CURRENCIES),
)
def test_a_rounded_amount_has_its_currencys_places_is_within_half_a_unit_and_rounds_to_itself(
    amount: Decimal, currency: str
) -> None:
    exponent = minor_exponent(currency)
    rounded = round_minor(amount, currency)
    assert rounded.as_tuple().exponent == -exponent
    assert abs(rounded - amount) <= Decimal(1).scaleb(-exponent) / 2
    assert round_minor(rounded, currency) == rounded
    assert not (rounded.is_zero() and rounded.is_signed())  # never "-0.00"


def test_half_a_unit_goes_to_the_even_neighbour_in_every_currency() -> None:
    assert round_minor(Decimal("0.5"), "JPY") == 0 and round_minor(Decimal("1.5"), "JPY") == 2
    assert round_minor(Decimal("0.0025"), "KWD") == Decimal("0.002")
    assert round_minor(Decimal("0.0035"), "KWD") == Decimal("0.004")


def test_a_split_keeps_every_key_and_gives_each_part_the_currencys_places() -> None:
    parts = {"2026-11-01": Decimal("10.004"), "2026-11-02": Decimal("0.003"), "2026-11-03": Decimal("0")}
    split = split_rounded(parts, "JPY")
    assert list(split) == list(parts)
    assert split == {"2026-11-01": Decimal("10"), "2026-11-02": Decimal("0"), "2026-11-03": Decimal("0")}
    assert all(v.as_tuple().exponent == 0 for v in split.values())


@given(
    parts=st.lists(
        st.decimals(min_value=Decimal(0), max_value=Decimal(1000), places=6, allow_nan=False), min_size=1, max_size=8
    ),
    currency=st.sampled_from(CURRENCIES),
)
def test_a_split_is_the_same_whatever_order_the_parts_come_in(parts: list[Decimal], currency: str) -> None:
    keyed = {f"p{i}": v for i, v in enumerate(parts)}
    backwards = dict(reversed(list(keyed.items())))
    assert split_rounded(keyed, currency) == split_rounded(backwards, currency)


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
