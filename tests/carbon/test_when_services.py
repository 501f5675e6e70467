"""Writes of "when to run" (apps/carbon/when_services.py): a forecast stored apart from the measured intensity, an hour
replaced by a later import, nothing written on bad input; the hints of record kept once per team, group and hour.
The import command is tests/carbon/test_forecast_import.py; the hints checked against what came,
tests/carbon/test_when_selectors.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.carbon.forecast import ForecastError
from apps.carbon.intensity import IntensityRow
from apps.carbon.models import ForecastHour, IntensityHour, WhenToRunHint
from apps.carbon.when_services import forecast_write, hints_record
from apps.fleet.models import Team
from apps.jobs.models import Job

from .fleet_builder import HOUR, T0, fleet_build
from .when_world import NOW, history, sweeps

pytestmark = pytest.mark.django_db

ISSUED = datetime(2026, 11, 1, 23, 40, tzinfo=UTC)


def _rows(*values: float) -> list[IntensityRow]:
    return [IntensityRow(hour=T0 + k * HOUR, kg_per_kwh=v, line=k + 1) for k, v in enumerate(values)]


# forecast_write


def test_a_forecast_is_stored_apart_and_a_later_one_replaces_its_hours() -> None:
    # given a site in TEST, and measured intensity of its first hour
    fleet_build(servers=1)
    IntensityHour.objects.create(zone="TEST", basis="location", hour=T0, kg_per_kwh=0.9, source="measured")
    # when a forecast is imported, then another made later
    first = forecast_write(rows=_rows(0.3, 0.4), zone="TEST", source="em", basis="location", issued_at=ISSUED)
    later = ISSUED + timedelta(hours=6)
    second = forecast_write(rows=_rows(0.3, 0.5, 0.6), zone="TEST", source="em", basis="location", issued_at=later)
    # then
    assert (first.created, first.replaced, first.unchanged) == (2, 0, 0)
    # every hour of the later forecast is written again: when it was made changed
    assert (second.created, second.replaced, second.unchanged) == (1, 2, 0)
    stored = {f.hour: (f.kg_per_kwh, f.issued_at) for f in ForecastHour.objects.all()}
    assert stored == {T0: (0.3, later), T0 + HOUR: (0.5, later), T0 + 2 * HOUR: (0.6, later)}
    # and the measured intensity is untouched
    assert list(IntensityHour.objects.values_list("kg_per_kwh", flat=True)) == [0.9]


def test_the_same_forecast_again_changes_nothing() -> None:
    fleet_build(servers=1)
    forecast_write(rows=_rows(0.3, 0.4), zone="TEST", source="em", basis="location", issued_at=ISSUED)
    again = forecast_write(rows=_rows(0.3, 0.4), zone="TEST", source="em", basis="location", issued_at=ISSUED)
    assert (again.created, again.replaced, again.unchanged) == (0, 0, 2)
    assert ForecastHour.objects.count() == 2


def test_a_bad_forecast_writes_nothing_and_names_every_problem() -> None:
    fleet_build(servers=1)
    naive = datetime(2026, 11, 1, 23, 40)  # noqa: DTZ001  (the mistake under test)
    rows = [*_rows(0.3), IntensityRow(hour=T0 + 30 * timedelta(minutes=1), kg_per_kwh=0.3, line=7)]
    with pytest.raises(ForecastError) as caught:
        forecast_write(rows=rows, zone="TEST", source="em", basis="location", issued_at=naive)
    assert caught.value.problems == [
        "--issued: a time with its zone (e.g. 2024-06-03T13:42:00Z)",
        "line 7: 2026-11-02 00:30:00+00:00 is not the start of a UTC hour",
    ]
    assert not ForecastHour.objects.exists()


def test_a_zone_no_site_uses_needs_leave() -> None:
    with pytest.raises(ForecastError, match="--zone FR: no site uses this zone"):
        forecast_write(rows=_rows(0.3), zone="FR", source="em", basis="location")
    report = forecast_write(rows=_rows(0.3), zone="FR", source="em", basis="location", allow_unknown_zone=True)
    assert report.created == 1 and report.issued_at is None


def test_the_report_says_a_forecast_changes_no_footprint() -> None:
    fleet_build(servers=1)
    report = forecast_write(rows=_rows(0.3, 0.4), zone="TEST", source="em", basis="location", issued_at=ISSUED)
    assert report.lines() == [
        "TEST (location) forecast from em, made 2026-11-01 23:40 UTC: 2 hours, "
        "2026-11-02 00:00 .. 2026-11-02 01:00 UTC",
        "2 new, 0 replaced, 0 unchanged (footprints unchanged: a forecast is never a measurement)",
    ]


# hints_record


def test_hints_are_kept_once_per_team_group_and_hour_for_the_teams_asked() -> None:
    # given two teams running the flexible group
    fleet = fleet_build(servers=1)
    nlp = Team.objects.create(name="nlp")
    history()
    sweeps(fleet)
    sweeps(fleet, team=nlp, first_gpu=1)
    # when one team's are kept
    assert hints_record(now=NOW, teams=[nlp]) == 1
    assert list(WhenToRunHint.objects.values_list("team__name", flat=True)) == ["nlp"]
    # when every team's are kept twice in the hour, then the next hour
    assert hints_record(now=NOW) == 2
    assert hints_record(now=NOW + timedelta(minutes=40)) == 2
    assert WhenToRunHint.objects.count() == 2
    hints_record(now=NOW + HOUR)
    # then one per team and hour
    kept = sorted(WhenToRunHint.objects.values_list("team__name", "made_at"))
    assert kept == [("nlp", NOW), ("nlp", NOW + HOUR), ("vision", NOW), ("vision", NOW + HOUR)]


def test_a_hint_with_no_best_start_is_not_kept() -> None:
    # given runs but no intensity at all: no forecast, no best start
    fleet = fleet_build(servers=1)
    sweeps(fleet)
    assert Job.objects.filter(job_group__flexible=True).count() == 3
    assert hints_record(now=NOW) == 0
    assert not WhenToRunHint.objects.exists()
