"""The arithmetic of "when to run" (apps/carbon/when_to_run.py, pure): the zone's profile, the typical run, the best
start within the deadline and its saving, the check of a past hint; docs/arithmetic.md's worked example."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.carbon.arithmetic import shift_saving_kg
from apps.carbon.when_to_run import (
    BestStart,
    best_start,
    forecast_pick,
    hint_check,
    hint_text,
    hour_of_week,
    profile_forecast,
    run_kg,
    typical_run,
    week_profile,
)
from apps.simulator.intensity import intensity_at

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 2, 22, tzinfo=UTC)  # a Monday, 22:00 UTC

# docs/arithmetic.md, "When to run": the worked example.
RUNS = [[4.0, 4.0, 2.0], [4.0, 4.0], [4.0, 4.0, 4.0, 1.0]]
FORECAST = [0.40, 0.38, 0.34, 0.30, 0.29, 0.31, 0.36, 0.39]
CAME = [0.41, 0.37, 0.35, 0.33, 0.27, 0.28, 0.35, 0.40]
DEADLINE_H = 8


def test_worked_example_of_the_docs() -> None:
    # given three recent runs of a flexible group and the zone's forecast from 22:00 UTC, a deadline of 8 h
    # when
    run = typical_run(RUNS)
    assert run is not None
    best = best_start(run.kwh, FORECAST, deadline_h=DEADLINE_H)
    # then the typical run is 3 h (the median), 4 + 4 + 2 kWh
    assert run.kwh == (4.0, 4.0, 2.0) and run.runs == 3 and run.facility_kwh == 10.0
    # started now 3.80 kg; the cleanest start is 3 h later, at 01:00 UTC: 2.98 kg, 0.82 kg or 22 % less
    assert best is not None
    assert best.now_kg == pytest.approx(3.80) and best.offset_h == 3 and best.best_kg == pytest.approx(2.98)
    assert best.saving_kg == pytest.approx(0.82) and best.saving_pct == pytest.approx(21.58, abs=0.01)
    text = hint_text(best, now=NOW, deadline_h=DEADLINE_H)
    assert text == "start after 01:00 UTC (Tue 3 Nov): \u22120.82 kg, \u221222 %"
    # and once the intensity came: that start saved 0.86 kg; the best in hindsight (02:00) 0.92; forecast off 4.7 %
    check = hint_check(kwh=run.kwh, forecast=FORECAST, actual=CAME, offset_h=3, made_at=NOW, deadline_h=DEADLINE_H)
    assert check.claimed_kg == pytest.approx(0.82)
    assert check.real_kg == pytest.approx(0.86) and check.real_pct == pytest.approx(100 * 0.86 / 3.82)
    assert check.best_real_kg == pytest.approx(0.92)
    assert check.forecast_error_pct == pytest.approx(100 * 0.13 / 2.76) and check.hours_compared == 8


def test_the_profile_is_the_mean_by_utc_hour_of_the_week() -> None:
    # given four Mondays at 22:00 UTC and one Tuesday at 03:00
    mondays = [(NOW - k * 7 * 24 * HOUR, kg) for k, kg in enumerate([0.42, 0.38, 0.40, 0.40], start=1)]
    tuesday = [(NOW - 7 * 24 * HOUR + 5 * HOUR, 0.2)]
    # when
    profile = week_profile(mondays + tuesday)
    # then
    assert hour_of_week(NOW) == 22 and profile == {22: pytest.approx(0.40), 24 + 3: 0.2}
    # an hour of the week with no figure is unknown, not 0
    assert profile_forecast(profile, [NOW, NOW + HOUR, NOW + 5 * HOUR]) == [pytest.approx(0.40), None, 0.2]


def test_hour_of_week_is_in_utc() -> None:
    berlin_monday_midnight = datetime.fromisoformat("2026-11-02T00:00:00+01:00")  # Sunday 23:00 UTC
    assert hour_of_week(berlin_monday_midnight) == 6 * 24 + 23


def test_an_imported_forecast_is_used_only_where_it_knows_the_run_started_now() -> None:
    imported: list[float | None] = [0.3, 0.3, None, 0.1]
    profile: list[float | None] = [0.4] * 4
    assert forecast_pick(imported, profile, length_h=2) == (imported, "imported")
    assert forecast_pick(imported, profile, length_h=3) == (profile, "profile")
    assert forecast_pick([], profile, length_h=1) == (profile, "profile")


def test_the_typical_run_is_the_lower_median_length_and_the_mean_per_hour() -> None:
    # a run that ended counts 0 in the hours after it
    assert typical_run([[2.0], [2.0, 2.0, 2.0], [2.0, 2.0]]) == typical_run([[2.0, 0.0], [2.0, 2.0], [2.0, 2.0]])
    run = typical_run([[1.0, 3.0], [3.0, 1.0, 5.0, 5.0]])
    assert run is not None and run.kwh == (2.0, 2.0)  # lengths 2 and 4: the lower median, 2
    assert typical_run([]) is None and typical_run([[0.0, 0.0]]) is None and typical_run([[]]) is None


def test_unknown_hours_are_never_a_start_and_never_zero() -> None:
    kwh = [1.0, 1.0]
    # the cleanest-looking hours are unknown: never chosen
    assert best_start(kwh, [0.5, 0.5, None, None, 0.4, 0.4], deadline_h=6) == BestStart(4, 1.0, 0.8)
    # without the hours of a run started now there is nothing to compare with
    assert best_start(kwh, [None, 0.5, 0.1, 0.1], deadline_h=4) is None
    assert run_kg(kwh, [0.5], offset_h=0) is None
    # a run longer than the deadline has no start to choose
    assert best_start([1.0] * 5, [0.3] * 10, deadline_h=4) is None


def test_equal_starts_keep_the_earliest_and_start_now_says_so() -> None:
    best = best_start([1.0, 1.0], [0.3] * 6, deadline_h=6)
    assert best == BestStart(0, 0.6, 0.6) and best.saving_kg == 0
    assert hint_text(best, now=NOW, deadline_h=6) == "start now: by the forecast no start within 6 h is cleaner"


def test_a_check_is_unknown_until_the_intensity_came() -> None:
    kwh = [1.0, 1.0]
    came: list[float | None] = [0.4, 0.4, 0.3, None]
    check = hint_check(kwh=kwh, forecast=[0.4, 0.4, 0.2, 0.2], actual=came, offset_h=2, made_at=NOW, deadline_h=4)
    assert check.claimed_kg == pytest.approx(0.4) and check.claimed_pct == pytest.approx(50)
    assert check.real_kg is None and check.real_pct is None and check.best_real_kg is None
    assert check.hours_compared == 3


@given(
    kwh=st.lists(st.floats(0.0, 50.0), min_size=1, max_size=6),
    intensity=st.lists(st.floats(0.005, 1.5), min_size=24, max_size=24),
    deadline_h=st.integers(1, 24),
)
def test_with_a_perfect_forecast_the_hint_claims_what_the_measured_shift_saving_finds(
    kwh: list[float], intensity: list[float], deadline_h: int
) -> None:
    # the forward hint and the backward-looking measured saving are the same arithmetic: with the forecast equal to
    # the intensity that came, the hint's claim is the measured shift saving, and its check finds it again
    best = best_start(kwh, intensity, deadline_h=deadline_h)
    measured = shift_saving_kg([(NOW + k * HOUR, e) for k, e in enumerate(kwh)],
                               {NOW + k * HOUR: v for k, v in enumerate(intensity)}, deadline_h=deadline_h)  # fmt: skip
    if len(kwh) > deadline_h:
        assert best is None
        return
    assert best is not None and measured is not None
    assert best.saving_kg == pytest.approx(measured, rel=1e-8, abs=1e-9)
    assert best.saving_kg >= 0
    check = hint_check(
        kwh=kwh, forecast=intensity, actual=intensity, offset_h=best.offset_h, made_at=NOW, deadline_h=deadline_h
    )
    assert check.real_kg == pytest.approx(check.claimed_kg) and check.forecast_error_pct == 0
    assert check.best_real_kg == pytest.approx(check.claimed_kg, rel=1e-8, abs=1e-9)


def _profile_weeks_table(weeks: int) -> tuple[float, float]:
    """docs/arithmetic.md, "Why four weeks": over a year of the simulator's synthetic DE intensity, a hint for a 4-hour
    run of 1 kWh an hour every 14 hours from the profile of `weeks` weeks: how far the profile is off (sum |f - a| /
    sum a, %) and what its hints saved by the intensity that came, in % of the best in hindsight."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    came = {start + k * HOUR: intensity_at(start + k * HOUR, zone="DE") for k in range(400 * 24)}
    off = total = real = best = 0.0
    made_at = start + 9 * 7 * 24 * HOUR
    while made_at < start + (400 * 24 - 48) * HOUR:
        profile = week_profile((h, came[h]) for h in (made_at - k * HOUR for k in range(1, weeks * 168 + 1)))
        forecast = profile_forecast(profile, [made_at + k * HOUR for k in range(24)])
        actual = [came[made_at + k * HOUR] for k in range(24)]
        off += sum(abs(f - a) for f, a in zip(forecast, actual, strict=True) if f is not None)
        total += sum(actual)
        hint = best_start([1.0] * 4, forecast, deadline_h=24)
        check = hint_check(kwh=[1.0] * 4, forecast=forecast, actual=actual, offset_h=hint.offset_h, made_at=made_at,
                           deadline_h=24)  # fmt: skip
        real += check.real_kg or 0.0
        best += check.best_real_kg or 0.0
        made_at += 14 * HOUR
    return round(100 * off / total, 1), round(100 * real / best)


def test_the_table_of_profile_weeks_in_the_docs() -> None:
    table = {weeks: _profile_weeks_table(weeks) for weeks in (1, 2, 4, 8)}
    assert table == {1: (8.3, 91), 2: (7.4, 93), 4: (6.6, 94), 8: (6.4, 95)}
