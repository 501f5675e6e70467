"""days_reach (apps.jobs.models): the jobs whose hour rows may lie in a period, found by their days (the UTC days of
their first and last hour rows), those without days recorded kept."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from apps.jobs.models import Job, days_reach
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_the_jobs_whose_days_reach_into_a_period_and_those_without_days() -> None:
    # given jobs on days before, across and after a period, one on its last day, and one without days
    days = {
        "before": (date(2026, 11, 1), date(2026, 11, 1)),
        "across the start": (date(2026, 11, 1), date(2026, 11, 2)),
        "inside": (date(2026, 11, 3), date(2026, 11, 3)),
        "on the last day": (date(2026, 11, 4), date(2026, 11, 5)),
        "after": (date(2026, 11, 5), date(2026, 11, 6)),
        "no days": (None, None),
    }
    for name, (first, last) in days.items():
        JobFactory(name=name, first_day=first, last_day=last)
    # when the period is Nov 2 to Nov 4, 12:00 (UTC; asked in another zone)
    start = datetime(2026, 11, 2, tzinfo=UTC)
    end = datetime.fromisoformat("2026-11-04T13:00:00+01:00")
    found = set(Job.objects.filter(days_reach(start=start, end=end)).values_list("name", flat=True))
    # then the jobs with a day in it and the one without days
    assert found == {"across the start", "inside", "on the last day", "no days"}
    # and a period ending at midnight ends the day before
    end = datetime(2026, 11, 4, tzinfo=UTC)
    found = set(Job.objects.filter(days_reach(start=start, end=end)).values_list("name", flat=True))
    assert found == {"across the start", "inside", "no days"}
