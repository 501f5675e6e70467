"""The team page's "When to run" (frontend/templates/dashboard/_when_to_run.html): the hint of each flexible group with
its typical run and its forecast's source, the hints kept in the period against the intensity that came, and the
runs' measured shift saving beside them; another team's groups are not on it."""

from __future__ import annotations

from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from apps.carbon.when_services import hints_record
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from tests.carbon.fleet_builder import HOUR, fleet_build, intensity_set
from tests.carbon.when_world import HINT_AT_NOW, NOW, history, sweeps

from .test_fleet_dashboard import ARTIFACTS, _login, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _section(html: str) -> str:
    start = html.index('<section class="card" id="when-to-run">')
    return unescape(html[start : html.index("</section>", start)])


def test_the_team_page_shows_the_hint_its_source_and_how_the_kept_hints_did(monkeypatch) -> None:
    # given a flexible group of vision's, one of nlp's, a hint kept at 22:00 and the intensity that came after it
    fleet = fleet_build(servers=1)
    nlp = Team.objects.create(name="nlp")
    history()
    jobs = sweeps(fleet)
    sweeps(fleet, team=nlp, runs=1, first_gpu=1)
    Job.objects.filter(team=nlp).update(name="nlp-only-run")
    hints_record(now=NOW - 24 * HOUR)
    came = [0.5] * 24
    came[5], came[6] = 0.3, 0.3  # the hinted 03:00 and 04:00 of the day before came at 0.3, not the forecast 0.2
    intensity_set("TEST", came, start=NOW - 24 * HOUR)
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    monkeypatch.setattr(timezone, "now", lambda: NOW + timedelta(minutes=7))
    # when
    html = client.get(f"/teams/{fleet.team.pk}/", {"start": "2026-11-23", "end": "2026-12-01"}).content.decode()
    # then the hint as of 22:00 UTC, its typical run and where its forecast comes from
    section = _section(html)
    assert "Hints as of 2026-11-30 22:00 UTC; times in UTC." in section
    assert HINT_AT_NOW in section
    assert "2 h, 1.6 kWh (facility), from 3 runs" in section
    assert "profile of the last 4 weeks of stored intensity, to 2026-11-30 21:00 UTC" in section
    # the kept hint: claimed 0.78 kWh x 2 x (0.5 - 0.2) = 0.47 kg; by the intensity that came x (0.5 - 0.3) = 0.31 kg
    assert "1 hint: claimed \u22120.47 kg, by the intensity that came \u22120.31 kg" in section
    assert '<table id="when-past">' in section and "Mon 03:00" in section
    # the runs' measured shift saving, looking back, beside it
    measured = sum(Job.objects.get(pk=j.pk).shift_saving_kg or 0 for j in jobs)
    assert f"\u2212{measured:.2f} kg (3 runs)" in section or f"\u2212{measured:.1f} kg (3 runs)" in section
    # and nothing of the other team's
    assert "nlp" not in section.lower()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_hint_is_on_the_team_page_in_the_browser(live_server, browser, monkeypatch) -> None:  # noqa: F811
    # given vision's flexible group with runs, and a member
    fleet = fleet_build(servers=1)
    history()
    sweeps(fleet)
    User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=User.objects.get(username="ada"), team=fleet.team)
    monkeypatch.setattr(timezone, "now", lambda: NOW + timedelta(minutes=7))
    # when the member opens the team page
    page = browser.new_page(viewport={"width": 1300, "height": 1300})
    _login(page, live_server.url, "ada", "pw-ada")
    page.goto(f"{live_server.url}/teams/{fleet.team.pk}/?start=2026-11-23&end=2026-12-01")
    # then the hint is shown, with where its forecast comes from
    hint = page.locator("#when-hints tr[data-group=sweeps] .when-hint")
    hint.scroll_into_view_if_needed()
    assert hint.is_visible() and hint.inner_text() == HINT_AT_NOW
    assert page.locator("#when-hints .when-source").inner_text().startswith("profile of the last 4 weeks")
    page.locator("#when-to-run").screenshot(path=str(ARTIFACTS / "team-when-to-run.png"))
