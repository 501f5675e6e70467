"""The idle line a team sees next to its own figures (apps.rollups.selectors.team_idle; docs/arithmetic.md, "The
idle line"): with FLEETWATT_IDLE_SHARED_TO_TEAMS its share by GPU-hours, on its bill; otherwise the whole idle
line of the clusters it ran on, the fleet's."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.rollups.selectors import cluster_rollup, team_idle, team_rollup
from tests.carbon.fleet_builder import T0, fleet_build, idle_hours, intensity_set, job_run

pytestmark = pytest.mark.django_db

START, END = T0, T0 + timedelta(days=1)


@pytest.fixture
def world():
    # given one server of 8 GPUs for 4 hours: vision's job on 3 GPUs, nlp's on 1, 4 GPUs idle
    cache.clear()
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    job_run(fleet, key="slurm/v", gpus=fleet.gpus[:3], hours=4, power_w=600)
    other = job_run(fleet, key="slurm/n", gpus=fleet.gpus[3:4], hours=4, power_w=600)
    nlp = Team.objects.create(name="nlp")
    Job.objects.filter(pk=other.pk).update(team=nlp)
    idle_hours(fleet, gpus=fleet.gpus[4:], hours=4, power_w=75)
    footprints_recompute()
    yield fleet, nlp
    cache.clear()


def _cluster_idle(fleet) -> dict:
    doc = cluster_rollup(cluster=fleet.cluster, start=START, end=END, granularity="day")
    periods = [p["idle"] for p in doc["periods"] if p["idle"]]
    return {
        "energy_j": sum(p["energy_j"] for p in periods),
        "gpu_hours": sum(p["gpu_hours"] for p in periods),
        "facility_kwh": sum(p["facility_kwh"] for p in periods),
        "cost": sum((p["cost"] for p in periods), Decimal(0)),
    }


def test_without_sharing_a_team_sees_the_fleet_s_idle_line(world, settings) -> None:
    fleet, nlp = world
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = False
    # when
    idle = team_idle(team=fleet.team, start=START, end=END)
    whole = _cluster_idle(fleet)
    # then the whole idle line of its cluster, and none of it on its bill
    assert idle["shared"] is False and idle["clusters"] == [fleet.cluster.name]
    assert whole["gpu_hours"] == pytest.approx(16.0) and whole["energy_j"] > 0
    assert idle["gpu_hours"] == pytest.approx(whole["gpu_hours"])
    assert idle["energy_j"] == pytest.approx(whole["energy_j"])
    assert idle["facility_kwh"] == pytest.approx(whole["facility_kwh"])
    assert idle["cost"] == whole["cost"] and idle["cost"] > 0
    rollup = team_rollup(team=fleet.team, start=START, end=END, granularity="day")
    assert all(p["idle"] is None for p in rollup["periods"])


def test_with_sharing_each_team_sees_its_share_by_gpu_hours(world, settings) -> None:
    fleet, nlp = world
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = True
    # when
    vision, other = team_idle(team=fleet.team, start=START, end=END), team_idle(team=nlp, start=START, end=END)
    whole = _cluster_idle(fleet)
    # then 3/4 and 1/4 of the idle line (their GPU-hours 12 and 4), adding up to it
    assert vision["shared"] is True
    assert vision["gpu_hours"] == pytest.approx(0.75 * whole["gpu_hours"])
    assert other["gpu_hours"] == pytest.approx(0.25 * whole["gpu_hours"])
    assert vision["energy_j"] + other["energy_j"] == pytest.approx(whole["energy_j"])
    assert vision["facility_kwh"] + other["facility_kwh"] == pytest.approx(whole["facility_kwh"])
    assert abs(vision["cost"] + other["cost"] - whole["cost"]) < Decimal("0.0001")
    # and the same as the idle of its rollup's periods (what the API serves)
    rollup = team_rollup(team=fleet.team, start=START, end=END, granularity="day")
    assert vision["cost"] == sum((p["idle"]["cost"] for p in rollup["periods"] if p["idle"]), Decimal(0))


def _text(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    tag = html.rfind("<", 0, start)
    name = re.match(r"<(\w+)", html[tag:]).group(1)
    return " ".join(re.sub(r"<[^>]+>", " ", html[tag : html.index(f"</{name}>", start)]).split())


@pytest.mark.parametrize("shared", [False, True])
def test_the_team_page_shows_the_idle_line_in_energy_kg_and_money(world, settings, shared: bool) -> None:
    fleet, nlp = world
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = shared
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    # when the member opens the team's page
    html = client.get(f"/teams/{fleet.team.pk}/", {"start": "2026-11-02", "end": "2026-11-03"}).content.decode()
    idle = team_idle(team=fleet.team, start=START, end=END)
    # then the idle line, labelled by what it is, with its energy (which energy), kg and money
    section = _text(html, "idle-line")
    if shared:
        assert "Idle capacity: your team's share" in section and "on your team's bill" in section
    else:
        assert "Idle capacity: the fleet's idle line" in section and "on nobody's bill" in section
    assert _text(html, "idle-cost") == f"{idle['cost']:.2f}"
    assert _text(html, "idle-facility-kwh") == f"{idle['facility_kwh']:.1f}"
    assert "kWh (facility)" in section and "kWh (GPU)" in section and "kg CO2e" in section


@pytest.mark.parametrize("shared", [False, True])
def test_a_team_sees_its_share_of_idle_by_gpu_hours_beside_the_fleet_s_never_as_a_percentage(
    world, settings, shared: bool
) -> None:
    fleet, nlp = world
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = shared
    # when
    vision = team_idle(team=fleet.team, start=START, end=END)
    whole = _cluster_idle(fleet)
    # then its share by its GPU-hours (12 of 16) whether or not the site puts it on the bill, and the whole beside
    assert vision["share"]["gpu_hours"] == pytest.approx(0.75 * whole["gpu_hours"])
    assert vision["fleet"]["gpu_hours"] == pytest.approx(whole["gpu_hours"])
    assert vision["fleet"]["cost"] == whole["cost"]
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    html = client.get(f"/teams/{fleet.team.pk}/", {"start": "2026-11-02", "end": "2026-11-03"}).content.decode()
    section = _text(html, "idle-line")
    # and the page never frames the fleet's idle line as a percentage of one team's cost
    assert "% on top" not in section and "%" not in _text(html, "idle-share")
    if not shared:
        assert _text(html, "idle-share-cost") == f"{vision['share']['cost']:.2f}"
    else:
        assert _text(html, "idle-fleet-cost") == f"{whole['cost']:.2f}"
