"""Hourly grid-intensity files (apps/carbon/intensity.py, pure): the hour of a timestamp, the file's span and its
gaps, the list of problems, the size limit and the plain layout written back. Each layout's rules, line by line, and
the import through the database are tests/carbon/test_intensity_import.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.carbon.intensity import (
    BASES,
    IntensityError,
    IntensityRow,
    hour_parse,
    intensity_parse,
    plain_csv,
)
from apps.carbon.models import Basis

H = timedelta(hours=1)


def test_the_bases_are_the_models() -> None:
    assert tuple(Basis.values) == BASES


# hour_parse


@pytest.mark.parametrize(
    ("text", "hour"),
    [
        ("2024-06-03T14:00:00Z", datetime(2024, 6, 3, 14, tzinfo=UTC)),
        ("2024-06-03T14:00:00", datetime(2024, 6, 3, 14, tzinfo=UTC)),  # no offset: UTC
        ("2024-06-03 16:00:00+02:00", datetime(2024, 6, 3, 14, tzinfo=UTC)),  # converted
        ("  2024-06-03T14:00Z ", datetime(2024, 6, 3, 14, tzinfo=UTC)),
        ("2024-06-03T19:30:00+05:30", datetime(2024, 6, 3, 14, tzinfo=UTC)),  # on the hour in UTC
    ],
)
def test_an_hour_is_the_aware_utc_hour(text: str, hour: datetime) -> None:
    parsed = hour_parse(text)
    assert parsed == hour and parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no timestamp"),
        ("2024-06-03", "a date without a time"),
        ("2024-06-03T14:30:00Z", "not on the hour"),
        ("2024-06-03T14:00:00+00:30", "not on the hour"),  # on the hour locally, not in UTC
        ("2024-06-03T14:00:00.5Z", "not on the hour"),
        ("yesterday", "not an ISO 8601 time"),
        ("0001-01-01T00:00:00+01:00", "out of the range of dates"),
        ("2" * 100, "characters) is not an ISO 8601 time"),
    ],
)
def test_what_is_not_an_hour_says_why(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        hour_parse(text)


# intensity_parse: what the whole file gives


def test_rows_are_sorted_and_the_span_counts_its_missing_hours() -> None:
    # given hours 02, 00 and 05 (03 and 04 missing), out of order
    text = "datetime,kg_per_kwh\n2024-06-03T02:00Z,0.2\n2024-06-03T00:00Z,0.1\n2024-06-03T05:00Z,0.5\n"
    # when
    parsed = intensity_parse(text, zone="DE")
    # then
    assert [r.kg_per_kwh for r in parsed.rows] == [0.1, 0.2, 0.5]
    assert [r.line for r in parsed.rows] == [3, 2, 4]  # where each was read
    assert parsed.first_hour == datetime(2024, 6, 3, tzinfo=UTC)
    assert parsed.last_hour == datetime(2024, 6, 3, 5, tzinfo=UTC)
    assert parsed.missing_hours == 3
    assert (parsed.layout, parsed.value_column) == ("plain", "kg_per_kwh")


def test_a_byte_order_mark_and_blank_lines_are_no_problem() -> None:
    text = "\ufeff\n\ndatetime,kg_per_kwh\n\n2024-06-03T00:00Z,0.1\n\n"
    assert [r.line for r in intensity_parse(text, zone="DE").rows] == [5]


def test_the_direct_column_of_an_electricity_maps_export_when_asked() -> None:
    text = (
        "Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct),Carbon Intensity gCO₂eq/kWh (LCA)\n"
        "2024-06-03 00:00:00,DE,250,310\n"
    )
    assert intensity_parse(text, zone="DE", ema_column="direct").rows[0].kg_per_kwh == 0.25
    assert intensity_parse(text, zone="DE").rows[0].kg_per_kwh == 0.31  # life-cycle by default


def test_an_electricity_maps_export_of_another_zone_is_refused() -> None:
    text = "Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (LCA)\n2024-06-03 00:00:00,FR,60\n"
    with pytest.raises(IntensityError, match="zone 'FR' is not the zone imported"):
        intensity_parse(text, zone="DE")


def test_a_column_named_twice_is_refused() -> None:
    with pytest.raises(IntensityError, match="line 1: a column is named twice"):
        intensity_parse("datetime,kg_per_kwh,datetime\n", zone="DE")


def test_an_unknown_ema_column_is_refused_before_reading() -> None:
    with pytest.raises(IntensityError, match="--ema-column: expected one of lca, direct, got 'mean'"):
        intensity_parse("datetime,kg_per_kwh\n2024-06-03T00:00Z,0.1\n", zone="DE", ema_column="mean")


def test_a_file_over_the_limit_is_refused_unread() -> None:
    text = "datetime,kg_per_kwh\n" + "2024-06-03T00:00Z,0.1\n" * 10
    with pytest.raises(IntensityError) as caught:
        intensity_parse(text, zone="DE", max_bytes=100)
    assert caught.value.problems == [f"the file is {len(text):,} bytes; an intensity file is at most 100"]


def test_a_cell_the_csv_reader_cannot_hold_is_a_problem_not_a_crash() -> None:
    text = 'datetime,kg_per_kwh\n"' + "x" * 200_000 + '",0.1\n'
    with pytest.raises(IntensityError, match="not a readable CSV file"):
        intensity_parse(text, zone="DE")


# IntensityError


def test_the_error_lists_thirty_problems_and_counts_the_rest() -> None:
    error = IntensityError([f"line {n}: bad" for n in range(2, 42)])
    text = str(error).splitlines()
    assert text[0] == "40 problems with the intensity file:"
    assert text[1] == "  - line 2: bad" and text[30] == "  - line 31: bad"
    assert text[-1] == "  ... and 10 more"
    assert len(error.problems) == 40  # all of them kept


def test_one_problem_is_not_plural() -> None:
    assert str(IntensityError(["x"])).splitlines()[0] == "1 problem with the intensity file:"


# plain_csv


def test_the_plain_layout_is_utc_with_four_decimals() -> None:
    text = plain_csv([(datetime(2024, 6, 3, 18, tzinfo=UTC).astimezone(timezone(timedelta(hours=2))), 0.123456)])
    assert text == "datetime,kg_per_kwh\n2024-06-03T18:00:00Z,0.1235\n"


@settings(max_examples=40, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=90 * 8766).map(lambda n: datetime(2000, 1, 1, tzinfo=UTC) + n * H),
    values=st.lists(st.integers(min_value=0, max_value=20_000), min_size=1, max_size=48),
)
def test_what_plain_csv_writes_reads_back(start: datetime, values: list[int]) -> None:
    # given figures to the ten-thousandth (what the layout keeps)
    series = [(start + k * H, v / 10_000) for k, v in enumerate(values)]
    # when written and read again
    parsed = intensity_parse(plain_csv(series), zone="DE")
    # then the same hours and figures, with no gap
    assert [(r.hour, r.kg_per_kwh) for r in parsed.rows] == series
    assert parsed.missing_hours == 0


def test_a_row_is_a_plain_value() -> None:
    row = IntensityRow(hour=datetime(2024, 6, 3, tzinfo=UTC), kg_per_kwh=0.3)
    assert row.line == 0 and row == IntensityRow(hour=row.hour, kg_per_kwh=0.3)
