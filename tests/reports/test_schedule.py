"""Which week is due when, in the site's time zone."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from apps.reports.schedule import week_due, week_label, week_window, zone


@pytest.mark.parametrize(
    ("now", "tz", "expected"),
    [
        ("2026-11-09T07:00:00+00:00", "UTC", date(2026, 11, 2)),  # Monday 07:00: the week that ended
        ("2026-11-09T06:59:59+00:00", "UTC", date(2026, 10, 26)),  # before: the week before (already sent)
        ("2026-11-15T23:00:00+00:00", "UTC", date(2026, 11, 2)),  # any time later that week
        ("2026-11-09T06:00:00+00:00", "Europe/Berlin", date(2026, 11, 2)),  # 07:00 in Berlin
        ("2026-11-09T05:59:00+00:00", "Europe/Berlin", date(2026, 10, 26)),
        ("2026-11-09T01:30:00+00:00", "Asia/Kolkata", date(2026, 11, 2)),  # 07:00 at UTC+05:30
        ("2026-11-09T11:59:00+00:00", "America/New_York", date(2026, 10, 26)),  # 06:59 EST
        ("2026-11-09T12:00:00+00:00", "America/New_York", date(2026, 11, 2)),
        ("2026-11-09T07:30:00+00:00", "Not/AZone", date(2026, 11, 2)),  # unknown: UTC
    ],
)
def test_week_due(now: str, tz: str, expected: date) -> None:
    assert week_due(now=datetime.fromisoformat(now), tz=zone(tz)) == expected


def test_week_due_follows_the_configured_weekday_and_hour() -> None:
    wednesday_9 = {"weekday": 2, "hour": 9, "tz": zone("UTC")}
    assert week_due(now=datetime(2026, 11, 11, 8, 59, tzinfo=UTC), **wednesday_9) == date(2026, 10, 26)
    assert week_due(now=datetime(2026, 11, 11, 9, 0, tzinfo=UTC), **wednesday_9) == date(2026, 11, 2)


def test_week_window_is_local_monday_to_monday_across_daylight_saving() -> None:
    start, end = week_window(date(2026, 10, 19), zone("Europe/Berlin"))  # summer time ends on 25 October
    assert start == datetime(2026, 10, 18, 22, tzinfo=UTC) and end == datetime(2026, 10, 25, 23, tzinfo=UTC)
    assert (end - start).total_seconds() == 169 * 3600
    start, end = week_window(date(2026, 11, 2), zone("UTC"))
    assert (start, end) == (datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 9, tzinfo=UTC))


def test_week_label() -> None:
    assert week_label(date(2026, 11, 2)) == "2 – 8 Nov 2026"
    assert week_label(date(2026, 10, 26)) == "26 Oct – 1 Nov 2026"
    assert week_label(date(2026, 12, 28)) == "28 Dec 2026 – 3 Jan 2027"
