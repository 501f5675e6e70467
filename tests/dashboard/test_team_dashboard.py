"""The team dashboard in Debian's chromium: cost, energy and carbon side by side, equal to the API."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

from .test_fleet_dashboard import ARTIFACTS, _login, browser  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_team_page_shows_cost_energy_carbon_and_the_intensity_basis(live_server, browser) -> None:  # noqa: F811
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 12 + [0.1] * 12 + [0.3] * 24)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:4], hours=30, power_w=600)
    low = job_run(fleet, key="slurm/2", gpus=fleet.gpus[4:6], hours=6, power_w=450, start=T0 + 10 * HOUR)
    footprints_recompute()
    Job.objects.filter(pk=low.pk).update(coverage=0.91, sampled_s=1.0, energy_j=1.0)
    member = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    api = APIClient()
    api.force_authenticate(member)
    rollup = api.get(f"/api/teams/{fleet.team.pk}/rollup/", {"start": "2026-11-02", "end": "2026-11-04"}).json()

    page = browser.new_page(viewport={"width": 1300, "height": 1300})
    _login(page, live_server.url, "ada", "pw-ada")
    page.goto(f"{live_server.url}/teams/{fleet.team.pk}/?start=2026-11-02&end=2026-11-04")
    page.wait_for_selector("#team-carbon-chart .main-svg")
    plotted = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#team-chart .chart')].flatMap(c => c.data)"
        ".map(t => [t.name, t.y.reduce((a, b) => a + b, 0)]))"
    )
    assert plotted["cost (EUR)"] == pytest.approx(float(sum(Decimal(p["cost"]) for p in rollup["periods"])))
    assert plotted["facility energy (kWh)"] == pytest.approx(sum(p["facility_kwh"] for p in rollup["periods"]))
    assert plotted["operational CO2e (kg)"] == pytest.approx(sum(p["operational_kg"] for p in rollup["periods"]))
    assert plotted["embodied CO2e (kg)"] == pytest.approx(sum(p["embodied_kg"] for p in rollup["periods"]))
    page.wait_for_selector("#method-chart .main-svg")
    by_method = page.evaluate(
        "document.getElementById('method-chart').data.reduce((s, t) => s + t.y.reduce((a, b) => a + b, 0), 0)"
    )
    assert by_method == pytest.approx(sum(p["energy_j"] for p in rollup["periods"]) / 3.6e6)
    csv = page.request.get(live_server.url + page.get_attribute("#rollup-csv", "href"))
    assert csv.ok and csv.headers["content-type"].startswith("text/csv")
    # a header, a row a day, and the totals row
    assert csv.text().splitlines()[0].startswith("period,") and len(csv.text().splitlines()) == 4
    carbon = float(page.inner_text("#total-carbon").split()[0].replace(",", ""))
    total_kg = sum(p["operational_kg"] + p["embodied_kg"] for p in rollup["periods"])
    assert carbon == pytest.approx(total_kg, abs=0.05)  # to the tenth shown, not truncated to a whole kg
    note = page.inner_text("#intensity-note")
    assert "location basis" in note and "TEST" in note and "test" in note
    page.screenshot(path=str(ARTIFACTS / "dashboard-team.png"), full_page=True)

    # the flagged-jobs table lists exactly the team's jobs under 95 % coverage
    listed = page.eval_on_selector_all(
        "#flagged-jobs tbody tr[data-job-key]", "rows => rows.map(r => r.dataset.jobKey)"
    )
    assert listed == ["slurm/2"]
    page.goto(f"{live_server.url}/jobs/{low.pk}/")
    assert "tdp estimate" in page.inner_text("body").lower()
    page.screenshot(path=str(ARTIFACTS / "dashboard-job.png"), full_page=True)

    # another team's pages are not there for this member
    stranger = Team.objects.create(name="nlp")
    assert page.goto(f"{live_server.url}/teams/{stranger.pk}/").status == 404
    foreign = job_run(fleet, key="slurm/theirs", gpus=fleet.gpus[6:7], hours=1, power_w=300)
    foreign.team = stranger
    foreign.save()
    assert page.goto(f"{live_server.url}/jobs/{foreign.pk}/").status == 404
