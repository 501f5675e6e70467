"""Synthetic grid intensity and its forecast (apps/simulator/intensity.py, pure): an hour's figure depends on the
zone, the hour, the mean and the seed only, never on the window asked for; it stays inside what an import takes;
a forecast is off by no more than its lead allows. Imported and used: tests/carbon/test_intensity_import.py and
tests/carbon/test_forecast_import.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.simulator.intensity import (
    FORECAST_SPREAD_48H,
    MAX_KG_PER_KWH,
    MIN_KG_PER_KWH,
    ZONES,
    forecast_at,
    forecast_series,
    intensity_at,
    intensity_series,
)

T0 = datetime(2026, 6, 1, tzinfo=UTC)
H = timedelta(hours=1)
HOURS = st.integers(min_value=0, max_value=5 * 8766).map(lambda n: datetime(2024, 1, 1, tzinfo=UTC) + n * H)


def test_an_hours_figure_does_not_depend_on_the_window_asked_for() -> None:
    week = dict(intensity_series(zone="DE", start=T0, end=T0 + 7 * 24 * H))
    day = dict(intensity_series(zone="DE", start=T0 + 48 * H, end=T0 + 72 * H))
    assert len(week) == 168 and all(week[h] == v for h, v in day.items())
    # an hour asked in another zone's clock is the same hour
    assert intensity_at(T0.astimezone(timezone(timedelta(hours=9))), zone="DE") == week[T0]


def test_zones_seeds_and_means_make_different_series() -> None:
    de = [v for _, v in intensity_series(zone="DE", start=T0, end=T0 + 24 * H)]
    assert de != [v for _, v in intensity_series(zone="DE", start=T0, end=T0 + 24 * H, seed=1)]
    fr = [v for _, v in intensity_series(zone="FR", start=T0, end=T0 + 24 * H)]
    assert sum(fr) < sum(de)  # a nuclear grid against a coal one
    mean = [v for _, v in intensity_series(zone="XX", start=T0, end=T0 + 30 * 24 * H, mean_kg_per_kwh=0.5)]
    assert sum(mean) / len(mean) == pytest.approx(0.5, rel=0.15)


@settings(max_examples=200, deadline=None)
@given(hour=HOURS, zone=st.sampled_from([*ZONES, "NOWHERE"]), seed=st.integers(0, 5))
def test_every_figure_is_inside_what_an_import_takes(hour: datetime, zone: str, seed: int) -> None:
    value = intensity_at(hour, zone=zone, seed=seed)
    assert MIN_KG_PER_KWH <= value <= MAX_KG_PER_KWH < 2.0
    assert value == round(value, 4)


@settings(max_examples=200, deadline=None)
@given(issued=HOURS, lead_h=st.integers(min_value=0, max_value=96))
def test_a_forecast_is_off_by_no_more_than_its_lead_allows(issued: datetime, lead_h: int) -> None:
    hour = issued + lead_h * H
    truth, forecast = intensity_at(hour, zone="DE"), forecast_at(hour, issued=issued, zone="DE")
    allowed = FORECAST_SPREAD_48H * min(1.0, lead_h / 48)
    assert abs(forecast - truth) <= truth * allowed + 1e-4  # (rounded to the ten-thousandth)


def test_a_forecast_of_its_own_hour_is_the_truth_and_a_series_starts_at_its_issue() -> None:
    series = forecast_series(zone="DE", issued=T0, hours=3)
    assert [h for h, _ in series] == [T0, T0 + H, T0 + 2 * H]
    assert series[0][1] == intensity_at(T0, zone="DE")


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: intensity_series(zone="DE", start=datetime(2026, 6, 1), end=T0 + H), "time zone"),  # noqa: DTZ001
        (lambda: intensity_series(zone="DE", start=T0 + timedelta(minutes=5), end=T0 + H), "on the hour"),
        (lambda: intensity_series(zone="DE", start=T0, end=T0 + H, mean_kg_per_kwh=2.0), r"\(0, 1.5\]"),
        (lambda: forecast_series(zone="DE", issued=T0 + timedelta(minutes=5), hours=1), "on the hour"),
        (lambda: forecast_series(zone="DE", issued=datetime(2026, 6, 1), hours=1), "time zone"),  # noqa: DTZ001
    ],
)
def test_what_a_series_needs(call, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        call()
