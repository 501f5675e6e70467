"""The weekly e-mail's "When to run" (frontend/templates/reports/_when_to_run.html, email/_when_to_run.txt): the hint
of each flexible group as of the week's end, the week's hints against the intensity that came, in both parts and in
the archived document; a report archived before it has none and still renders."""

from __future__ import annotations

from datetime import date
from html import unescape

import pytest

from apps.carbon.when_services import hints_record
from apps.reports.rendering import team_report_render
from apps.reports.selectors import report_build, report_document
from tests.carbon.fleet_builder import HOUR, fleet_build
from tests.carbon.when_world import NOW, history, sweeps

pytestmark = pytest.mark.django_db
WEEK = date(2026, 11, 23)  # Monday to Monday 30 November, UTC: the hint looks forward from its end


def test_the_weekly_email_shows_the_hint_and_how_the_weeks_hints_did() -> None:
    # given a flexible group's runs, and a hint kept in the week (its intensity came, as forecast)
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    assert hints_record(now=NOW - 48 * HOUR) == 1
    # when the week's report is built and rendered
    doc = report_document(report_build(team=fleet.team, week_start=WEEK))
    mail = team_report_render(doc, report_url="https://fleetwatt.example.org/reports/1/")
    # then the document keeps the hint as of the week's end and the week's check
    [line] = doc["when_to_run"]
    assert doc["when_made_at"] == "2026-11-30 00:00" and doc["when_deadline_h"] == 24
    assert line["text"] == "start after 03:00 UTC (Mon 30 Nov): \u22120.47 kg, \u221260 %"
    assert (line["group"], line["zone"], line["run_length_h"]) == ("sweeps", "TEST", 2)
    assert (line["hints"], line["checked"]) == (1, 1)
    assert line["real_kg"] == pytest.approx(line["claimed_kg"]) and line["claimed_kg"] == pytest.approx(0.468)
    assert line["forecast_source"].startswith(
        "profile of the last 4 weeks of stored intensity (27 days of it), to 2026-11-29"
    )
    # and both parts of the e-mail show it
    assert "WHEN TO RUN: FLEXIBLE JOB GROUPS (hints as of 2026-11-30 00:00 UTC; times in UTC)" in mail.text
    assert "- sweeps (TEST): start after 03:00 UTC (Mon 30 Nov): \u22120.47 kg, \u221260 %" in mail.text
    assert "this week's hints: 1 checked, claimed \u22120.47 kg, by the intensity that came \u22120.47 kg" in mail.text
    html = unescape(mail.html)
    assert 'data-section="when-to-run"' in html and "start after 03:00 UTC (Mon 30 Nov)" in html
    assert "1 hint: claimed \u22120.47 kg, came \u22120.47 kg" in html


def test_a_report_archived_before_has_no_when_to_run_and_still_renders() -> None:
    fleet = fleet_build(servers=1)
    history()
    doc = report_document(report_build(team=fleet.team, week_start=WEEK))
    assert doc["when_to_run"] == []
    for old in (doc, {k: v for k, v in doc.items() if not k.startswith("when_")}):
        mail = team_report_render(old, report_url="https://fleetwatt.example.org/reports/1/")
        assert "WHEN TO RUN" not in mail.text and "when-to-run" not in mail.html
