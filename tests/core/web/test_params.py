"""apps.core.web.params: each parser against the values an attacker or a careless client sends, and property tests
against Python's own reading of the values it takes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.core.web import params
from apps.core.web.params import QueryError

FULL_WIDTH = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))
FULL_WIDTH_LETTERS = str.maketrans("EUR", "".join(chr(0xFF21 + ord(c) - ord("A")) for c in "EUR"))
ARABIC_INDIC = str.maketrans("0123456789", "".join(chr(0x0660 + d) for d in range(10)))


@pytest.mark.parametrize(
    ("parse", "good"),
    [
        (params.day, "2026-11-02"),
        (params.moment, "2026-11-02T08:00:00Z"),
        (params.month, "2026-11"),
        (params.iso_week, "2026-W48"),
        (lambda raw, name: params.whole_number(raw, name=name, low=1, high=100), "42"),
        (params.amount, "0.50"),
    ],
)
def test_each_parser_refuses_other_digits_trailing_newlines_nul_bytes_and_spaces(parse, good: str) -> None:
    parse(good, name="p")  # (the good value is read)
    for bad in (
        good.translate(FULL_WIDTH),
        good.translate(ARABIC_INDIC),
        good + "\n",
        good + "\x00",
        " " + good,
        good + " ",
        "",
        good * 2,
    ):
        with pytest.raises(QueryError) as refused:
            parse(bad, name="p")
        assert refused.value.name == "p" and str(refused.value).startswith("p: ")


@pytest.mark.parametrize(
    ("parse", "out_of_range"),
    [
        (params.day, ["0001-01-01", "1999-12-31", "2101-01-01", "9999-12-31"]),
        (params.moment, ["0001-01-01", "1999-12-31T23:59:59Z", "2101-01-01T00:00:01Z", "9999-12-31T23:59:59"]),
        (params.month, ["0000-01", "1999-12", "2101-01", "9999-12"]),
        (params.iso_week, ["0001-W01", "1999-W52", "2101-W01", "9999-W52"]),
    ],
)
def test_years_are_bounded(parse, out_of_range: list[str]) -> None:
    for raw in out_of_range:
        with pytest.raises(QueryError):
            parse(raw, name="p")


def test_a_period_may_end_at_the_first_moment_after_the_last_day() -> None:
    assert params.moment("2101-01-01", name="end") == params.MOMENT_MAX
    assert params.month("2100-12", name="month") == date(2100, 12, 1)
    assert params.month_after(date(2100, 12, 1)) == date(2101, 1, 1)


def test_impossible_calendar_values_are_refused() -> None:
    for parse, raw in [
        (params.day, "2026-02-30"),
        (params.month, "2026-13"),
        (params.month, "2026-00"),
        (params.iso_week, "2026-W54"),
        (params.iso_week, "2026-W00"),
        (params.moment, "2026-11-02T24:00:00Z"),
        (params.moment, "2026-11-02T08:00:00+24:00"),
        (params.moment, "2026-11-02T08:00:00+05:60"),
        (params.moment, "NaN"),
    ]:
        with pytest.raises(QueryError):
            parse(raw, name="p")


def test_a_moment_is_in_utc() -> None:
    assert params.moment("2026-11-02", name="p") == datetime(2026, 11, 2, tzinfo=UTC)
    assert params.moment("2026-11-02T08:00", name="p") == datetime(2026, 11, 2, 8, tzinfo=UTC)
    assert params.moment("2026-11-02T08:00:00+23:59", name="p") == datetime(2026, 11, 1, 8, 1, tzinfo=UTC)
    assert params.moment("2026-11-02 08:00:00.5-0130", name="p") == datetime(2026, 11, 2, 9, 30, 0, 500000, tzinfo=UTC)


NAIVE_2000_2100 = st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2100, 12, 30))  # noqa: DTZ001
NAIVE_ANY = st.datetimes(min_value=datetime(1, 1, 3), max_value=datetime(9999, 12, 29))  # noqa: DTZ001


@given(NAIVE_2000_2100, st.integers(-23 * 60, 23 * 60))
def test_every_iso_time_python_writes_is_read_as_python_reads_it(naive: datetime, offset_min: int) -> None:
    aware = naive.replace(tzinfo=timezone(timedelta(minutes=offset_min)))
    for written in (aware.isoformat(), str(aware)):
        assert params.moment(written, name="p") == datetime.fromisoformat(written).astimezone(UTC)
    assert params.moment(naive.isoformat(), name="p") == naive.replace(tzinfo=UTC)  # no offset: UTC


@given(st.text(max_size=30))
def test_no_text_with_a_nul_byte_a_surrogate_or_a_control_character_passes(raw: str) -> None:
    try:
        params.text(raw, name="q")
    except QueryError:
        return
    assert "\x00" not in raw and not any(0xD800 <= ord(c) <= 0xDFFF for c in raw)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in raw)


def test_text_takes_line_breaks_only_where_it_is_lines() -> None:
    assert params.text("why:\r\n\tbecause", name="reason", lines=True) == "why:\r\n\tbecause"
    for raw in ("req\n", "a\x00b", "\ud800", "\x1b[31m", "x" * 201):
        with pytest.raises(QueryError):
            params.text(raw, name="q")
    with pytest.raises(QueryError):
        params.text("a\x00b", name="reason", lines=True)
    assert params.text("é ü \u202e 名前", name="q") == "é ü \u202e 名前"  # (a right-to-left override is shown isolated)


@given(NAIVE_ANY)
def test_a_cursor_position_is_any_time_the_list_wrote(naive: datetime) -> None:
    written = naive.replace(tzinfo=UTC)
    assert params.position_moment(str(written), name="cursor") == written
    assert params.position_day(str(written.date()), name="cursor") == written.date()


def test_a_cursor_position_on_text_refuses_only_what_postgres_cannot_hold() -> None:
    assert params.stored_text("team with\nnewline", name="cursor") == "team with\nnewline"
    for raw in ("a\x00b", "\udfff", "x" * 1001):
        with pytest.raises(QueryError):
            params.stored_text(raw, name="cursor")


def test_ids_are_bigints_in_ascii_digits() -> None:
    assert params.object_id("9223372036854775807", name="id") == 2**63 - 1
    for raw in ("0", "9223372036854775808", "-1", "1.0", "1e3", "²", "9" * 5000):
        with pytest.raises(QueryError):
            params.object_id(raw, name="id")


def test_an_amount_is_digits_and_a_point_without_sign_exponent_or_special_values() -> None:
    assert params.amount("1", name="under") == 1 and params.amount("0.5", name="under") == Decimal("0.5")
    assert params.amount("12.", name="under") == 12
    for bad in ("-1", "+1", "-0", "1e3", "NaN", "Infinity", "1,000", ".5", "1.1234567", "1" * 13, "one"):
        with pytest.raises(QueryError, match=r"^under: an amount of money"):
            params.amount(bad, name="under")


def test_a_currency_is_three_capital_letters() -> None:
    assert params.currency("EUR", name="currency") == "EUR"
    for bad in ("eur", "EURO", "EU", "", "EUR\n", "E1R", "EUR".translate(FULL_WIDTH_LETTERS)):
        with pytest.raises(QueryError, match=r"^currency: a currency's three-letter code"):
            params.currency(bad, name="currency")
