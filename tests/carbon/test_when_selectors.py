"""When to run, from the database (apps/carbon/when_selectors.py, when_services.py): a flexible group's typical run
from the team's recent runs, the zone's profile or an imported forecast, the hint; the hints kept each hour and
their check against the intensity that came; the runs' measured shift saving beside them."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from apps.carbon.models import ForecastHour, JobGroup, WhenToRunHint
from apps.carbon.tasks import record_when_to_run_hints_task
from apps.carbon.when_selectors import group_hints, team_when_to_run, when_to_run
from apps.carbon.when_services import hints_record
from apps.fleet.models import Team
from apps.jobs.models import Job

from .fleet_builder import HOUR, fleet_build, intensity_set
from .when_world import HINT_AT_NOW, KWH_PER_H, NOW, history, sweeps

pytestmark = pytest.mark.django_db


def test_a_flexible_group_gets_a_hint_from_the_zones_profile_of_four_weeks() -> None:
    # given four weeks of the zone's intensity, cleaner at 03:00 UTC, and three 2-hour runs of a flexible group
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    # when the hint is asked at 22:00 UTC
    [hint] = group_hints(teams=[fleet.team], now=NOW + 25 * timedelta(minutes=1))
    # then the typical run is 2 h at 0.78 kWh an hour, started now 0.5 kg/kWh; at 03:00 UTC 0.2
    assert hint.made_at == NOW and hint.group == "sweeps" and hint.zone == "TEST"
    assert hint.run.kwh == pytest.approx((KWH_PER_H, KWH_PER_H)) and hint.run.runs == 3
    assert hint.forecast.kind == "profile"
    assert hint.forecast.source == (
        "profile of the last 4 weeks of stored intensity, to 2026-11-30 21:00 UTC (mean by UTC hour of the week; test)"
    )
    assert hint.best is not None and hint.best_start == NOW + 5 * HOUR
    assert hint.best.saving_kg == pytest.approx(2 * KWH_PER_H * (0.5 - 0.2))
    assert hint.best.saving_pct == pytest.approx(60)
    assert hint.text == HINT_AT_NOW


def test_an_imported_forecast_that_covers_the_run_is_used_and_named() -> None:
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    # given an imported forecast from now: cleanest at 00:00 UTC
    for k in range(10):
        ForecastHour.objects.create(
            zone="TEST", basis="location", hour=NOW + k * HOUR, kg_per_kwh=0.1 if k in (2, 3) else 0.4,
            source="EM forecast", issued_at=NOW - HOUR,
        )  # fmt: skip
    # when
    [hint] = group_hints(teams=[fleet.team], now=NOW)
    # then the imported one decides, and says where it is from; the hours past its reach are unknown, never 0
    assert hint.forecast.kind == "imported"
    assert hint.forecast.source == "imported forecast: EM forecast, made 2026-11-30 21:00 UTC"
    assert hint.best_start == NOW + 2 * HOUR and hint.forecast.values[10:] == [None] * 14
    assert hint.best is not None and hint.best.saving_kg == pytest.approx(2 * KWH_PER_H * 0.3)


def test_a_forecast_that_misses_the_first_hours_falls_back_to_the_profile() -> None:
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    ForecastHour.objects.create(zone="TEST", basis="location", hour=NOW + HOUR, kg_per_kwh=0.1, source="EM")
    [hint] = group_hints(teams=[fleet.team], now=NOW)
    assert hint.forecast.kind == "profile" and hint.best_start == NOW + 5 * HOUR


def test_without_stored_intensity_there_is_no_hint_and_nothing_is_zero() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 2, start=NOW - 5 * 24 * HOUR)  # enough for the runs' footprints, not a profile
    sweeps(fleet, runs=1)
    [hint] = group_hints(teams=[fleet.team], now=NOW)
    assert hint.best is None and hint.text == "no hint: the forecast does not know every hour of a run started now"
    # the profile knows Wednesday's two hours of the week, none of the next 24
    assert hint.forecast.values == [None] * 24
    assert "profile of the last 4 weeks of stored intensity (2 hours of it)" in hint.forecast.source


def test_a_run_longer_than_the_deadline_has_no_start_to_choose(settings) -> None:
    settings.FLEETWATT_SHIFT_DEADLINE_H = 3
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet, hours=4)
    [hint] = group_hints(teams=[fleet.team], now=NOW)
    assert hint.best is None and hint.text == "no hint: its typical run (4 h) is longer than the deadline (3 h)"


def test_a_team_hint_comes_from_its_own_runs_only() -> None:
    # given the same flexible group run by two teams: vision 2 h runs, nlp 5 h runs
    fleet = fleet_build(servers=1)
    nlp = Team.objects.create(name="nlp")
    history()
    sweeps(fleet, hours=2)
    sweeps(fleet, team=nlp, hours=5, first_gpu=1)
    # when
    hints = {h.team: h for h in group_hints(teams=[fleet.team, nlp], now=NOW)}
    # then each team's typical run is its own
    assert hints["vision"].run.length_h == 2 and hints["nlp"].run.length_h == 5
    assert [h.team for h in group_hints(teams=[fleet.team], now=NOW)] == ["vision"]


def test_a_group_that_is_not_flexible_or_ran_long_ago_gets_no_hint() -> None:
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    assert group_hints(teams=[fleet.team], now=NOW + 5 * 7 * 24 * HOUR) == []  # the last run ended 5 weeks before
    JobGroup.objects.update(flexible=False)
    assert group_hints(teams=[fleet.team], now=NOW) == []


def test_hints_kept_each_hour_are_checked_against_the_intensity_that_came() -> None:
    # given the hint of 22:00 kept (twice: the same hint once)
    fleet = fleet_build(servers=1)
    history()
    jobs = sweeps(fleet)
    assert hints_record(now=NOW) == 1
    assert record_when_to_run_hints_task(now_iso=(NOW + 10 * timedelta(minutes=1)).isoformat()) == 1
    kept = WhenToRunHint.objects.get()
    assert (kept.made_at, kept.best_start, kept.forecast_kind, kept.runs) == (NOW, NOW + 5 * HOUR, "profile", 3)
    assert len(kept.forecast) == 24 and kept.run_kwh == pytest.approx([KWH_PER_H, KWH_PER_H])
    # when the intensity of its window has not come yet
    doc = team_when_to_run(team=fleet.team, now=NOW, start=NOW, end=NOW + HOUR)
    [checked] = doc.past
    # then its claim is known, what came is not (null, never 0)
    assert checked.check.claimed_kg == pytest.approx(2 * KWH_PER_H * 0.3)
    assert checked.check.real_kg is None and checked.check.best_real_kg is None
    # when the intensity comes: the hinted 03:00 was 0.3, 04:00 0.1 (the best in hindsight), now 0.5
    came = [0.5] * 24
    came[5], came[6], came[7] = 0.3, 0.1, 0.1
    intensity_set("TEST", came, start=NOW)
    doc = team_when_to_run(team=fleet.team, now=NOW, start=NOW, end=NOW + HOUR)
    [checked] = doc.past
    assert checked.check.real_kg == pytest.approx(KWH_PER_H * (1.0 - 0.4))
    assert checked.check.best_real_kg == pytest.approx(KWH_PER_H * (1.0 - 0.2))
    assert checked.check.forecast_error_pct == pytest.approx(100 * (0.1 + 0.1 + 0.4) / sum(came))
    # and the summary puts the claims beside what came, and the runs' measured shift saving beside both
    [line] = doc.lines
    assert line.hint is not None and line.summary is not None
    assert (line.summary.hints, line.summary.checked) == (1, 1)
    assert line.summary.claimed_kg == pytest.approx(checked.check.claimed_kg)
    assert line.summary.real_kg == pytest.approx(checked.check.real_kg)
    week = team_when_to_run(team=fleet.team, now=NOW, start=NOW - 7 * 24 * HOUR, end=NOW + HOUR)
    [line] = week.lines
    measured = sum(Job.objects.get(pk=j.pk).shift_saving_kg or 0 for j in jobs)
    assert line.summary is not None and line.summary.runs == 3
    assert line.summary.measured_shift_kg == pytest.approx(measured) and measured > 0


def test_the_queries_do_not_grow_with_teams(django_assert_max_num_queries) -> None:
    fleet = fleet_build(servers=1)
    history()
    teams = [fleet.team]
    for k in range(3):
        team = Team.objects.create(name=f"t{k}")
        sweeps(fleet, team=team, first_gpu=k + 1)
        teams.append(team)
    hints_record(now=NOW)
    with django_assert_max_num_queries(12):
        docs = when_to_run(teams=teams, now=NOW, start=NOW, end=NOW + HOUR)
    assert [len(d.hints) for d in docs] == [0, 1, 1, 1] and [d.past_count for d in docs] == [0, 1, 1, 1]


def test_the_command_shows_and_keeps_hints() -> None:
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    out = StringIO()
    call_command("when_to_run", at=[NOW.isoformat()], stdout=out)
    assert "2026-11-30 22:00 UTC vision / sweeps (TEST): start after 03:00 UTC" in out.getvalue()
    assert not WhenToRunHint.objects.exists()
    call_command("when_to_run", at=[NOW.isoformat(), (NOW - HOUR).isoformat()], record=True, stdout=out)
    assert WhenToRunHint.objects.count() == 2


def test_beat_keeps_the_hints_each_hour(settings) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["when-to-run-hints"]
    assert entry["task"] == record_when_to_run_hints_task.name and entry["schedule"].minute == {15}
