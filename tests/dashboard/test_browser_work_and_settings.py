"""Issue 37's figures on the pages, in Debian's chromium, through the real path: the simulator's vLLM server and its
GPU's power limit -> promtool -> a real Prometheus -> `manage.py ingest` -> the team page's and the job page's work
served (J per 1,000 tokens equal to the simulator's truth within 0.5 %, the CSV the team page links to), and the GPU
page's power limit and SM clock per hour with the period's summary, the same as the GPU API answers; no serious or
critical axe-core violation on any of them."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from apps.fleet.models import Gpu, Team, TeamMembership
from apps.jobs.models import Job
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import T0
from tests.integration.fleet_run import config_applied_and_ingested

from .test_browser_pages import _axe_serious
from .test_fleet_dashboard import _login, browser  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SERVER = "k8s/search/llama-0"
SCENARIO = {
    "name": "served-pages",
    "start": T0.isoformat(),
    "duration": "3h",
    "scrape_interval_s": 15,
    "linger_s": 120,
    "gpu_settings": True,
    "nodes": [{"hostname": "k8s-a", "gpus": 1}],
    "jobs": [
        {"scheduler": "k8s", "namespace": "search", "pod": "llama-0", "node": "k8s-a", "gpus": [0], "start": "10m",
         "end": "2h40m", "sm": [[0, 80], ["1h", 40]], "power_w": [[0, 600], ["1h", 380]],
         "serving": {"model": LLAMA, "tokens_per_s": 2400}},
    ],
    "power_limits": [{"node": "k8s-a", "gpu": 0, "at": "1h30m", "watts": 450}],
}  # fmt: skip
CONFIG = """
sites:
  - {name: dc, grid_zone: XX, pue: 1.2, electricity_price_per_kwh: 0.20, currency: EUR, timezone: UTC}
gpu_models:
  - {name: NVIDIA H200, hourly_rate: 2.50, currency: EUR, tdp_w: 700}
clusters:
  - {name: default, prometheus_url: "%s", scrape_interval_s: 15, site: dc}
teams:
  - {name: search, rules: [{kind: k8s_namespace, value: search}]}
"""
PERIOD = "?start=2026-11-02&end=2026-11-03"


@pytest.fixture
def served(history_loader, tmp_path: Path):
    history = history_loader(SCENARIO)
    config_applied_and_ingested(history.url, CONFIG, tmp_path, hours=3)
    User.objects.create_user("boss", password="pw-boss", is_staff=True)
    ada = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=ada, team=Team.objects.get(name="search"))
    truth = history.truth[SERVER]
    return truth.energy_j / truth.output_tokens * 1000, truth


def _number(text: str) -> float:
    return float(text.replace(",", "").split()[0])


def _served_cells(page) -> list[str]:
    return page.eval_on_selector_all(
        f'#served-by-model tr[data-model="{LLAMA}"] td.num', "cells => cells.map(c => c.textContent.trim())"
    )


def test_the_pages_show_the_work_served_per_token_and_the_gpu_s_settings(served, live_server, browser) -> None:  # noqa: F811
    truth_j_per_1k, truth = served
    violations: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    # given a member of the serving team
    _login(page, live_server.url, "ada", "pw-ada")
    # when they open the team page
    team = Team.objects.get(name="search")
    assert page.goto(f"{live_server.url}/teams/{team.pk}/{PERIOD}").ok
    violations += [f"team: {v}" for v in _axe_serious(page)]
    # then the model's line: its tokens as counted, its joules per 1,000 tokens the simulator's within 0.5 %
    cells = _served_cells(page)
    assert _number(cells[0]) == pytest.approx(truth.output_tokens, abs=1)
    assert _number(cells[2]) == pytest.approx(truth_j_per_1k, rel=0.005)
    assert _number(cells[3]) == pytest.approx(truth_j_per_1k / 3600, rel=0.005)
    assert cells[5].endswith("EUR")
    # and the CSV it links to says the same
    answer = page.request.get(live_server.url + page.get_attribute("#served-csv", "href"))
    assert answer.ok and answer.headers["content-type"].startswith("text/csv")
    (row,) = [r for r in csv.DictReader(io.StringIO(answer.text())) if r["name"] == LLAMA]
    assert float(row["energy_j_per_1k_tokens"]) == pytest.approx(_number(cells[2]), abs=0.05)
    # and the job's own page
    job = Job.objects.get(job_key=SERVER)
    assert page.goto(f"{live_server.url}/jobs/{job.pk}/").ok
    violations += [f"job: {v}" for v in _axe_serious(page)]
    assert _number(_served_cells(page)[2]) == pytest.approx(truth_j_per_1k, rel=0.005)
    page.close()

    # given an admin, on the GPU's page
    page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    _login(page, live_server.url, "boss", "pw-boss")
    gpu = Gpu.objects.get(node__hostname="k8s-a", index=0)
    assert page.goto(f"{live_server.url}/gpus/{gpu.pk}/{PERIOD}").ok
    violations += [f"gpu: {v}" for v in _axe_serious(page)]
    # then each hour's limit and clock as ingested: 700 W, capped to 450 W at 01:30, then 450 W
    shown = page.eval_on_selector_all(
        "#gpu-settings tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))"
    )
    assert [r[2] for r in shown] == ["700", "450–700", "450"]
    hours = list(GpuHour.objects.filter(gpu=gpu).order_by("hour"))
    assert [r[3] for r in shown] == [f"{h.sm_clock_mhz:,.0f}" for h in hours]
    summary = re.sub(r"\s+", " ", page.text_content("#gpu-settings-period") or "")
    assert "power limit 450–700 W" in summary and "(3 of 3 hours known)" in summary
    # and the GPU API answers the same hours
    api = page.request.get(f"{live_server.url}/api/gpus/{gpu.pk}/hours/").json()["results"]
    assert [(r["power_limit_min_w"], r["power_limit_max_w"]) for r in api] == [(700, 700), (450, 700), (450, 450)]
    detail = page.request.get(f"{live_server.url}/api/gpus/{gpu.pk}/{PERIOD}").json()
    assert detail["power_limit_w"] == pytest.approx(sum(h.power_limit_w for h in hours) / 3)
    page.close()
    assert not violations, "\n".join(violations)
