"""The fleet dashboard in a real browser: Debian's chromium driven by Playwright, against the live app."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from apps.fleet.models import Team, TeamMembership, TeamRule
from apps.jobs.methods import Method
from apps.jobs.models import Job
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.browser, pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install chromium).")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop beside Django's ORM
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        yield browser
        browser.close()


def _login(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def test_dashboard_renders_chart_and_flagged_jobs(history_loader, cluster_for, live_server, browser) -> None:
    # given an ingested fleet, an admin, and a member of team vision
    history = history_loader(spine_scenario())
    cluster_for(history)
    vision = Team.objects.create(name="vision")
    TeamRule.objects.create(team=vision, kind="slurm_account", value="vision")
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T07:00:00Z", verbosity=0)
    User.objects.create_user("boss", password="pw-boss", is_staff=True)
    member = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=member, team=vision)
    ARTIFACTS.mkdir(exist_ok=True)
    period = "?start=2026-11-02&end=2026-11-03"

    # when the admin opens the fleet dashboard
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    _login(page, live_server.url, "boss", "pw-boss")
    page.goto(f"{live_server.url}/{period}")
    page.wait_for_selector("#energy-chart .main-svg")

    # then the chart has one bar trace per split method, named by its label, and the table lists exactly the
    # low-coverage jobs
    traces = page.evaluate("document.getElementById('energy-chart').data.map(t => t.name)")
    assert {Method.WHOLE_GPU.label, Method.SM_TIME.label} <= set(traces) <= {m.label for m in Method}
    total_kwh = page.evaluate(
        "document.getElementById('energy-chart').data.reduce((s, t) => s + t.y.reduce((a, b) => a + b, 0), 0)"
    )
    assert total_kwh == pytest.approx(sum(j.energy_j for j in Job.objects.all()) / 3.6e6, rel=1e-6)
    listed = page.eval_on_selector_all(
        "#flagged-jobs tbody tr[data-job-key]", "rows => rows.map(r => r.dataset.jobKey)"
    )
    expected = sorted(k for k, t in history.truth.items() if t.coverage < 0.95)
    assert sorted(listed) == expected
    page.wait_for_selector("#teams-chart .main-svg")
    for link in ("#energy-csv", "#teams-csv"):
        csv = page.request.get(live_server.url + page.get_attribute(link, "href"))
        assert csv.ok and csv.headers["content-type"].startswith("text/csv") and len(csv.text().splitlines()) > 1
    page.screenshot(path=str(ARTIFACTS / "dashboard-fleet-admin.png"), full_page=True)
    for name, path in {
        "audit": "/audit/",
        "gpu": f"/gpus/{Job.objects.get(job_key='slurm/102').gpu_hours_rows.first().gpu_id}/",
    }.items():
        assert page.goto(f"{live_server.url}{path}{period}").status == 200
        page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)

    # and a member sees only the team's energy
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    _login(page, live_server.url, "ada", "pw-ada")
    page.goto(f"{live_server.url}/{period}")
    page.wait_for_selector("#energy-chart .main-svg")
    teams = page.evaluate("[...new Set(document.getElementById('energy-chart').data.flatMap(t => t.x[1]))]")
    assert teams == ["vision"]
    page.screenshot(path=str(ARTIFACTS / "dashboard-fleet-member.png"), full_page=True)


def test_dashboard_requires_login(client) -> None:
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
