"""The team page's and the job page's work served: per model, the tokens, requests and figures per token, as
/api/work/ gives them; “—” where a figure is not known; nothing on a job that served nothing."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.fleet.models import TeamMembership
from apps.jobs.models import JobWorkHour
from apps.pipeline.inputs import footprints_recompute
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    server = job_run(fleet, key="k8s/search/llama-0", gpus=fleet.gpus[:1], hours=2, power_w=500)
    for h in range(2):
        JobWorkHour.objects.create(
            job=server, hour=T0 + h * HOUR, engine="vllm", model="llama", output_tokens=3.6e6, requests=9000
        )
    JobWorkHour.objects.create(job=server, hour=T0, engine="tgi", model="", prompt_tokens=1e5)  # no output tokens
    training = job_run(fleet, key="slurm/9", gpus=fleet.gpus[1:2], hours=1, power_w=600)
    JobWorkHour.objects.create(job=training, hour=T0, engine="fleetwatt", unit="step", units=1234)
    footprints_recompute()
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    return fleet, server, training, client


def _rows(html: str) -> dict[str, list[str]]:
    table = html[html.index('id="served-by-model"') :].split("</table>")[0]
    rows = re.findall(r'<tr data-model="([^"]*)"><td>[^<]*</td>(.*?)</tr>', table, re.S)
    return {model: re.findall(r'<td class="num">(.*?)</td>', rest) for model, rest in rows}


def test_the_team_page_shows_each_model_s_figures_per_token(world) -> None:
    fleet, server, training, client = world
    html = client.get(f"/teams/{fleet.team.pk}/", {"start": "2026-11-02", "end": "2026-11-03"}).content.decode()
    rows = _rows(html)
    # 2 h at 500 W for 7.2 M tokens: 500 J per 1,000 tokens; billed 2 GPU-hours x 2.50 + 1 kWh x 1.3 x 1.2 x 0.20 =
    # 5.31 EUR (rounded first), 0.7375 EUR per million tokens
    assert rows["llama"][:4] == ["7,200,000", "18,000", "500.0", "0.139"]
    assert rows["llama"][5:] == ["0.7375 EUR", "1"]
    assert rows[""][:5] == ["0", "0", "—", "—", "—"] and rows[""][5] == "—"  # prompt tokens only: no figure
    assert 'id="served-csv"' in html and "team=vision" in html


def test_the_job_page_shows_what_it_served_and_a_training_job_its_units(world) -> None:
    fleet, server, training, client = world
    html = client.get(f"/jobs/{server.pk}/").content.decode()
    assert _rows(html)["llama"][2] == "500.0" and 'id="served-csv"' not in html
    trained = client.get(f"/jobs/{training.pk}/").content.decode()
    assert 'id="counted-units"' in trained and "1,234 step" in trained and 'id="served-by-model"' not in trained


def test_a_job_that_served_nothing_has_no_such_section(world) -> None:
    fleet, server, training, client = world
    quiet = job_run(fleet, key="slurm/10", gpus=fleet.gpus[2:3], hours=1, power_w=300)
    assert 'id="served-work"' not in client.get(f"/jobs/{quiet.pk}/").content.decode()
