"""The weekly report's number formats (apps/reports/formatting.py, pure): money half-even to the cent as the API
rounds it, quantities to fixed decimals with thousands grouped, a change in words, a day's text bar."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.reports.formatting import TEXT_BAR_WIDTH, change_pct, money, pct, qty, ratio_pct, textbar, words


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("1234.567"), "1,234.57"),
        ("0.125", "0.12"),  # half-even: a tie goes to the even cent
        ("0.135", "0.14"),
        (2.675, "2.68"),  # the float's shortest text, not its binary value (2.67499999...)
        (0, "0.00"),
        ("-1000.5", "-1,000.50"),
        ("not money", ""),
        (None, ""),
    ],
)
def test_money_to_the_cent(value: object, text: str) -> None:
    assert money(value) == text


def test_quantities_and_percentages_with_nothing_shown_as_nothing() -> None:
    assert qty(1234.5678) == "1,234.57" and qty(1234.5678, 0) == "1,235" and qty("3", "1") == "3.0"
    assert qty(None) == "" and qty("") == ""
    assert pct(12.345) == "12.3 %" and pct(None) == ""
    assert ratio_pct(0.8123) == "81 %" and ratio_pct(1) == "100 %" and ratio_pct("") == ""


@pytest.mark.parametrize(
    ("change", "text"),
    [
        ({"pct": 12.34, "now": 1}, "+12.3 %"),
        ({"pct": -4.0, "now": 1}, "-4.0 %"),
        ({"pct": 0.04, "now": 1}, "no change"),  # rounds to 0.0: no sign to show
        ({"pct": None, "now": 5}, "new"),  # nothing the week before
        ({"pct": None, "now": 0}, "no change"),  # nothing either week
    ],
)
def test_a_change_in_words(change: dict[str, object], text: str) -> None:
    assert change_pct(change) == text


def test_a_days_text_bar_is_waste_then_the_rest_padded_to_its_width() -> None:
    assert textbar({"waste_pct": 10, "busy_pct": 50}) == "xxx" + "#" * 15 + "." * 12
    assert textbar({"waste_pct": 0, "busy_pct": 0}) == "." * TEXT_BAR_WIDTH
    assert len(textbar({"waste_pct": 30, "busy_pct": 70})) == TEXT_BAR_WIDTH


def test_a_code_in_words() -> None:
    assert words("idle_allocation") == "idle allocation" and words("memory") == "memory"
