"""The idle line apart from what nobody saw (docs/arithmetic.md, "The idle line"): a pod whose agent died before
it ended, on a cluster whose scheduler is not read, is not charged the rest of its run (nothing says it ran
then); that energy stays on the idle line, and every rollup, the team page and the fleet summary show it apart
as `unobserved` ("unseen, nobody saw") beside the GPUs seen with no job. The simulator's fleet -> promtool ->
a real Prometheus -> the ingest, hour by hour; then the site's prices set and the footprints recomputed."""

from __future__ import annotations

import re
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from apps.carbon.models import GpuModel, Site
from apps.core.units.footprint import S_PER_HOUR, kwh
from apps.fleet.models import Gpu, Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.inputs import footprints_recompute
from apps.reports.rendering import fleet_summary_render
from apps.reports.selectors import fleet_summary_build, report_document
from apps.rollups.selectors import team_idle
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import intensity_set
from tests.pipeline.test_agent_bridged_gaps import HOURS, T0, bridged_scenario

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

RATE, PRICE, PUE = Decimal("2.50"), Decimal("0.20"), 1.2
DAY = {"start": "2026-11-16", "end": "2026-11-17"}


@pytest.fixture
def ingested(history_loader, cluster_for) -> Any:
    history = history_loader(bridged_scenario())
    cluster = cluster_for(history)
    for h in range(HOURS):  # hour by hour, as beat does
        hour = T0 + timedelta(hours=h)
        call_command("ingest", start=hour.isoformat(), end=(hour + timedelta(hours=1)).isoformat(), verbosity=0)
    # the site's prices and grid, then every footprint again (as after a change of the fleet's config)
    site = Site.objects.create(
        name="site-a", grid_zone="TEST", intensity_basis="location", pue=PUE, electricity_price_per_kwh=PRICE,
        currency="EUR", timezone="UTC",
    )  # fmt: skip
    cluster.site = site
    cluster.save(update_fields=["site"])
    for model in set(Gpu.objects.values_list("model_name", flat=True)):
        GpuModel.objects.update_or_create(name=model, defaults={"hourly_rate": RATE, "currency": "EUR"})
    intensity_set("TEST", [0.3] * 24, start=T0)
    footprints_recompute()
    return cluster


def _unseen_hours() -> list[GpuHour]:
    """GPU-hours the agent missed part of that no estimate covered whole: train-1's GPU once its agent died."""
    return [h for h in GpuHour.objects.all() if h.unobserved_j - h.estimated_j > 1.0]


def _cluster_rollup(cluster, **period: str) -> dict:
    client = APIClient()
    client.force_authenticate(User.objects.get_or_create(username="root", defaults={"is_staff": True})[0])
    answer = client.get(f"/api/clusters/{cluster.pk}/rollup/", {**period, "granularity": "day"})
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_the_cluster_rollup_gives_the_part_of_its_idle_line_nobody_saw(ingested) -> None:
    # given train-1's agent dead from 2 h while the pod ran to 3 h, then its GPU idle to 5 h, nobody seeing
    unseen = _unseen_hours()
    assert {h.gpu.node.hostname for h in unseen} == {"gpu-b"} and len(unseen) == 3
    unseen_j = sum(h.unobserved_j - h.estimated_j for h in unseen)
    unseen_s = sum(h.unobserved_s - h.estimated_s for h in unseen)
    assert kwh(unseen_j) > 0.4  # the pod's last hour at 450 W is in it
    # when finance reads the cluster's day, from its daily sums and from its hour rows
    for period in (DAY, {"start": T0.isoformat(), "end": (T0 + timedelta(hours=HOURS)).isoformat()}):
        doc = _cluster_rollup(ingested, **period)
        (day,) = doc["periods"]
        idle, part = day["idle"], day["unobserved"]
        # then the part of the idle line nobody saw is apart: the meter's joules no job was charged, over those seconds
        assert part["energy_j"] == pytest.approx(unseen_j, rel=1e-9)
        assert part["gpu_hours"] == pytest.approx(unseen_s / S_PER_HOUR, rel=1e-9)
        assert part["facility_kwh"] == pytest.approx(kwh(unseen_j) * PUE, rel=1e-9)
        assert part["operational_kg"] == pytest.approx(kwh(unseen_j) * PUE * 0.3, rel=1e-9)
        expected = RATE * Decimal(unseen_s / S_PER_HOUR) + PRICE * Decimal(kwh(unseen_j) * PUE)
        assert abs(Decimal(part["cost_exact"]) - expected) < Decimal("0.00001")
        assert doc["totals"]["unobserved"]["cost"] == part["cost"]
        # and what is left of the idle line is the energy the agent saw on GPUs with no job
        seen_j = sum(h.idle_energy_j + h.unattributed_j for h in GpuHour.objects.all())
        assert idle["energy_j"] - part["energy_j"] == pytest.approx(seen_j, rel=1e-6)
        assert 0 < part["energy_j"] < idle["energy_j"] and Decimal(part["cost_exact"]) < Decimal(idle["cost_exact"])
        # and the cluster's jobs plus its idle line are still its meter, to the joule and the cent
        device_j = sum(h.device_energy_j for h in GpuHour.objects.all())
        assert day["energy_j"] + idle["energy_j"] == pytest.approx(device_j, rel=1e-9)
        meter = sum((r.cost for r in JobGpuHour.objects.all()), Decimal(0)) + sum(
            (h.idle_cost for h in GpuHour.objects.all()), Decimal(0)
        )
        assert Decimal(day["cost_exact"]) + Decimal(idle["cost_exact"]) == meter


def _text(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    tag = html.rfind("<", 0, start)
    name = re.match(r"<(\w+)", html[tag:]).group(1)
    return " ".join(re.sub(r"<[^>]+>", " ", html[tag : html.index(f"</{name}>", start)]).split())


@pytest.mark.parametrize("shared", [False, True])
def test_the_team_page_shows_idle_seen_and_unseen_apart(ingested, settings, shared: bool) -> None:
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = shared
    team = Team.objects.get(pk=Job.objects.get(job_key__contains="train-1").team_id)
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=team)
    client = Client()
    client.force_login(member)
    # when the member opens the team's page for the day
    html = client.get(f"/teams/{team.pk}/", DAY).content.decode()
    idle = team_idle(team=team, start=T0, end=T0 + timedelta(days=1))
    # then the idle line's two parts, each with its energy, kg and money, adding up to the line
    section = _text(html, "idle-parts")
    assert "idle (seen, no job)" in section and "unseen (nobody saw)" in section
    assert idle["unseen"]["energy_j"] > 0 and idle["unseen"]["cost"] > 0
    assert idle["seen"]["cost"] + idle["unseen"]["cost"] == idle["cost"]
    assert idle["seen"]["energy_j"] + idle["unseen"]["energy_j"] == pytest.approx(idle["energy_j"])
    for part in ("seen", "unseen"):
        assert _text(html, f"idle-{part}-cost") == f"{idle[part]['cost']:.2f}"
        assert _text(html, f"idle-{part}-co2e") == f"{idle[part]['co2e_kg']:.1f}"
        assert _text(html, f"idle-{part}-gpu-kwh") == f"{idle[part]['energy_kwh']:.1f}"


def _money(value: Any) -> str:
    return f"{Decimal(value).quantize(Decimal('0.01')):,.2f}"


def test_the_fleet_summary_shows_idle_seen_and_unseen_apart(ingested) -> None:
    # when the fleet's weekly summary is made for the week of the ingested hours
    report = fleet_summary_build(week_start=date(2026, 11, 16))
    doc = report_document(report)
    rendered = fleet_summary_render(doc, report_url="http://fleetwatt.test/reports/1/")
    # then the idle line's two parts are apart, adding up to the clusters' idle line
    assert report.unseen.energy_j == pytest.approx(sum(h.unobserved_j - h.estimated_j for h in _unseen_hours()))
    assert report.idle_seen.cost + report.unseen.cost == report.idle.cost and report.unseen.cost > 0
    lines = rendered.text.splitlines()
    seen = next(line for line in lines if line.startswith("Idle (seen, no job): "))
    unseen = next(line for line in lines if line.startswith("Unseen (nobody saw): "))
    for line, part in ((seen, doc["idle_seen"]), (unseen, doc["unseen"])):
        assert f"{part['energy_kwh']:,.2f} kWh (GPU)" in line and f"{part['co2e_kg']:,.2f} kg" in line
        assert _money(part["cost"]) in line
    assert "Idle (seen, no job)" in rendered.html and "Unseen (nobody saw)" in rendered.html
    assert f"{doc['unseen']['energy_kwh']:,.2f} kWh" in rendered.html
