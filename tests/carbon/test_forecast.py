"""Grid-intensity forecast files (apps/carbon/forecast.py, pure): how a file is told apart, what a point gives, every
problem listed at once. Each bad input's message and the import through the database are
tests/carbon/test_forecast_import.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from apps.carbon.forecast import ForecastError, forecast_parse
from apps.carbon.intensity import IntensityError


def _ema(points: list[object], **top: object) -> str:
    return json.dumps({"zone": "DE", "forecast": points, **top})


def _point(hour: int, grams: object = 300, **extra: object) -> dict[str, object]:
    return {"carbonIntensity": grams, "datetime": f"2024-06-03T{hour:02d}:00:00.000Z", **extra}


def test_a_forecast_error_is_an_intensity_error_about_the_forecast() -> None:
    error = ForecastError(["point 1: no datetime"])
    assert isinstance(error, IntensityError)
    assert str(error).startswith("1 problem with the forecast file:")


def test_json_is_told_from_csv_by_its_first_character() -> None:
    # a byte-order mark and leading blank lines before the JSON
    parsed = forecast_parse("\ufeff\n  " + _ema([_point(8)]), zone="DE")
    assert parsed.layout == "electricitymaps-forecast"
    # a CSV keeps the intensity file's layout names
    csv = forecast_parse("datetime,zone,kg_per_kwh\n2024-06-03T08:00Z,DE,0.3\n", zone="DE")
    assert csv.layout == "plain+zone" and csv.left_out == 0 and csv.issued_at is None


def test_a_top_level_list_is_not_a_forecast() -> None:
    with pytest.raises(ForecastError, match='an object with a "forecast" list'):
        forecast_parse(json.dumps([_point(8)]), zone="DE")


def test_points_in_another_offset_are_their_utc_hour_and_sorted() -> None:
    points = [
        {"carbonIntensity": 200, "datetime": "2024-06-03T12:00:00+02:00"},
        {"carbonIntensity": 100, "datetime": "2024-06-03T09:00:00Z"},
    ]
    parsed = forecast_parse(_ema(points), zone="DE")
    assert [(r.hour, r.kg_per_kwh, r.line) for r in parsed.rows] == [
        (datetime(2024, 6, 3, 9, tzinfo=UTC), 0.1, 2),
        (datetime(2024, 6, 3, 10, tzinfo=UTC), 0.2, 1),
    ]


def test_when_it_was_made_is_read_in_utc_and_may_be_absent() -> None:
    made = forecast_parse(_ema([_point(8)], updatedAt="2024-06-03T09:42:00+02:00"), zone="DE")
    assert made.issued_at == datetime(2024, 6, 3, 7, 42, tzinfo=UTC)
    assert forecast_parse(_ema([_point(8)]), zone="DE").issued_at is None


def test_the_direct_figures_are_read_when_asked_for() -> None:
    text = _ema([_point(8, 250, emissionFactorType="direct")], emissionFactorType="direct")
    assert forecast_parse(text, zone="DE", ema_column="direct").rows[0].kg_per_kwh == 0.25
    with pytest.raises(ForecastError, match="not the 'lifecycle' figures"):
        forecast_parse(text, zone="DE")


def test_an_answer_without_a_zone_or_granularity_is_taken_for_the_zone_imported() -> None:
    text = json.dumps({"forecast": [_point(8)], "temporalGranularity": "hourly"})
    assert len(forecast_parse(text, zone="DE").rows) == 1


def test_an_unknown_ema_column_is_refused() -> None:
    with pytest.raises(ForecastError, match="--ema-column: expected one of lca, direct, got 'x'"):
        forecast_parse(_ema([_point(8)]), zone="DE", ema_column="x")


def test_every_problem_is_listed_at_once_and_nothing_is_returned() -> None:
    # given a wrong zone, a point that is no object, a boolean for grams, a point without its hour, and two good ones
    text = _ema([_point(8), "08:00", _point(9, True), {"carbonIntensity": 1}, _point(10)], zone="FR")
    # when
    with pytest.raises(ForecastError) as caught:
        forecast_parse(text, zone="DE")
    # then each is named, in order
    assert caught.value.problems == [
        "zone \"FR\" is not the zone imported ('DE')",
        "point 2: expected an object with datetime and carbonIntensity",
        "point 3: carbonIntensity true is not a number",
        "point 4: no datetime (an ISO 8601 time, e.g. 2024-06-03T14:00:00.000Z)",
    ]


def test_infinite_grams_are_refused() -> None:
    # JSON has no infinity, but Python's reader takes one
    with pytest.raises(ForecastError, match="point 1: carbonIntensity inf is not a finite number"):
        forecast_parse('{"forecast": [{"carbonIntensity": Infinity, "datetime": "2024-06-03T08:00:00Z"}]}', zone="DE")


def test_nulls_are_counted_left_out_and_never_become_rows() -> None:
    parsed = forecast_parse(_ema([_point(8, None), _point(9), _point(10, None)]), zone="DE")
    assert [r.hour.hour for r in parsed.rows] == [9] and parsed.left_out == 2


def test_a_file_over_the_limit_is_refused_unread() -> None:
    text = _ema([_point(h) for h in range(24)])
    with pytest.raises(ForecastError, match="a forecast file is at most 200"):
        forecast_parse(text, zone="DE", max_bytes=200)


def test_deep_nesting_is_unreadable_json_not_a_crash() -> None:
    with pytest.raises(ForecastError, match="not readable JSON"):
        forecast_parse("[" * 100_000, zone="DE")
