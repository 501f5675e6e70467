"""One glossary on every page (apps.core.units.glossary, apps/dashboard/templatetags/glossary.py): energy figures say
which energy they are, split methods and findings say what they mean and how exact they are, the job page's
hourly table is in hours, sampled time never exceeds the hour, and hours nobody saw show as such."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape

from apps.core.units import glossary
from apps.fleet.models import TeamMembership
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.pipeline.inputs import footprints_recompute
from apps.waste.kinds import FlagKind
from apps.waste.models import Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db


def _section(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    tag = html.rfind("<", 0, start)
    name = re.match(r"<(\w+)", html[tag:]).group(1)
    return html[tag : html.index(f"</{name}>", start)]


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture
def world():
    # given a job alone on a GPU for 2 hours (whole GPU), then sharing it for an hour (SM time), with a
    # dcgm-style hour "sampled" 3660 s, an hour the agent missed that the scheduler charged it (estimated),
    # no user name, and an idle allocation
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    job = job_run(fleet, key="slurm/7", gpus=fleet.gpus[:1], hours=2, power_w=500)
    gpu = fleet.gpus[0]
    shared_hour = T0 + 2 * HOUR
    JobGpuHour.objects.create(
        job=job, gpu=gpu, hour=shared_hour, source="agent", energy_j=900_000, sampled_s=3660, occupancy_s=1800
    )
    JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=shared_hour, method="sm_time", energy_j=900_000)
    JobGpuHour.objects.create(
        job=job, gpu=gpu, hour=T0 + 3 * HOUR, source="estimated", energy_j=360_000, sampled_s=0, occupancy_s=1800
    )
    JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=T0 + 3 * HOUR, method="estimated", energy_j=360_000)
    Job.objects.filter(pk=job.pk).update(
        user="", name="train", attribution_j={"whole_gpu": 3_600_000, "sm_time": 900_000, "estimated": 360_000}
    )
    footprints_recompute()
    Flag.objects.create(
        kind=FlagKind.IDLE_ALLOCATION, cluster=fleet.cluster, job=job,
        evidence={"from": T0.isoformat(), "to": (T0 + HOUR).isoformat(), "gpus": [gpu.uuid], "sm_percent": 2.0,
                  "gpu_hours_blocked": 2.0, "facility_kwh": 1.56, "co2e_kg": 0.5, "cost": "5.40", "memory_bytes": 0},
    )  # fmt: skip
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    job.refresh_from_db()
    return fleet, job, client


def test_the_glossary_covers_every_method_and_finding() -> None:
    # every split method's exactness and every finding's basis has words and a meaning in the glossary
    assert {m.info.exactness for m in Method} <= set(glossary.EXACTNESS)
    assert set(glossary.FINDING_BASIS) == {k.value for k in FlagKind}
    assert set(glossary.FINDING_BASIS.values()) <= set(glossary.EXACTNESS)
    assert glossary.energy_label("facility") == "Facility energy (kWh)"
    assert glossary.energy_unit("gpu") == "kWh (GPU)"
    assert glossary.exactness_words("estimate") == "estimated — not measured"


def test_the_job_page_names_methods_and_findings_with_their_meaning(world) -> None:
    fleet, job, client = world
    # when its team's member opens the job's page
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    # then the split says each method's name, how exact it is, and what it means as a tooltip
    split = html[html.index('id="job-split"') : html.index("coverage", html.index('id="job-split"'))]
    assert "Whole GPU — exact" in split and "SM time — close" in split and "Estimated — not measured" in split
    assert f'title="{escape(Method.SM_TIME.info.meaning)}' in split
    assert "whole_gpu 7" not in _text(split)  # no raw method names
    # GPU energy is labelled as such, in kWh (GPU)
    assert "kWh (GPU)" in _section(html, "job-energy")
    # the finding says what it is, how far to trust it, and what it means; not an identifier with "(open)"
    flags = _text(_section(html, "job-flags"))
    assert "Idle Allocation — exact" in flags and "Open" in flags and FlagKind.IDLE_ALLOCATION.info.meaning in flags
    assert "idle_allocation (open)" not in html
    # a job without a user says so, and no empty "· ·"
    who = _text(_section(html, "job-who"))
    assert "no user recorded" in who and "· ·" not in who


def test_the_job_page_s_hours_are_hours_and_sampled_never_exceeds_the_hour(world) -> None:
    fleet, job, client = world
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    table = _section(html, "job-hours")
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert "GPU energy (kWh)" in headers and "GPU-h" in headers
    rows = re.findall(r"<tr>(<td data-source=.*?)</tr>", table, re.S)
    cells = [[_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]
    gpu_h = [c[headers.index("GPU-h")] for c in cells]
    assert gpu_h == ["1.000", "1.000", "0.500", "0.500"]  # occupancy 3600, 3600, 1800, 1800 s
    sampled = [c[headers.index("Sampled (s)")] for c in cells]
    assert sampled == ["3,600", "3,600", "3,600 *", "—"], sampled  # grouped, as every figure
    assert "3660" not in table
    assert "Capped at the hour" in _text(_section(html, "sampled-note"))


def test_the_job_page_shows_the_hours_nobody_saw(world) -> None:
    fleet, job, client = world
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    # the estimated hour is in the table, marked, and the summary says how much is estimated
    assert re.search(r'data-source="estimated">.*?estimated</span> <small>— not measured', html, re.S)
    missed = _text(_section(html, "missed-hours"))
    assert "1 GPU-hour was not seen by the agent" in missed
    assert "0.50 GPU-h and 0.100 kWh (GPU) estimated — not measured" in missed


def test_the_team_page_says_which_energy_each_figure_is(world) -> None:
    fleet, job, client = world
    html = client.get(f"/teams/{fleet.team.pk}/", {"start": "2026-11-02", "end": "2026-11-03"}).content.decode()
    totals = _text(_section(html, "total-energy"))
    assert totals.endswith("kWh (facility)")
    assert "Facility energy (kWh)" in _text(_section(html, "waste"))
    assert "GPU energy (kWh)" in _text(_section(html, "top-jobs"))
    # methods in the top jobs' split are named with their exactness
    assert "Whole GPU — exact" in _section(html, "top-jobs")
    # findings in the waste table are named, with their status
    waste = _text(_section(html, "waste"))
    assert "Idle Allocation — exact" in waste and "Open" in waste
