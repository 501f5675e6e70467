"""The fleet page's "Needs attention" strip (apps/dashboard/attention.py): open waste findings and their money,
jobs under the coverage threshold, each cluster's ingest lag, scheduler sync errors and GPUs with no energy meter,
each saying so plainly when there is nothing, and each scoped as the rest of the page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.dashboard.attention import fleet_attention
from apps.fleet.models import Gpu, Node
from apps.jobs.models import Job, JobGpuHour
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from apps.waste.models import Flag
from tests.carbon.fleet_builder import T0
from tests.dashboard.fleet_world import HOUR, PERIOD, FleetWorld, fleet_world_build, module_world

pytestmark = pytest.mark.django_db

EMPTY_PERIOD = {"start": "2026-11-10", "end": "2026-11-11"}


@pytest.fixture(scope="module")
def world(django_db_setup: None, django_db_blocker: Any) -> Iterator[FleetWorld]:
    yield from module_world(django_db_blocker, fleet_world_build)


def _strip(user: User, period: dict[str, str] = PERIOD) -> dict[str, str]:
    """The strip's items as text, by their data-item, and the raw HTML under "html"."""
    client = Client()
    client.force_login(user)
    response = client.get("/", period)
    assert response.status_code == 200
    html = response.content.decode()
    section = html[html.index('id="attention"') : html.index("</section>", html.index('id="attention"'))]
    items = {
        m.group(1): " ".join(re.sub(r"<[^>]+>", "", m.group(2)).split())
        for m in re.finditer(r'<li data-item="([\w-]+)">(.*?)</li>', section, re.S)
    }
    return {**items, "html": section}


def test_an_admin_sees_every_item_with_its_figures(world: FleetWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    # when an admin opens the fleet page on the world's day, ten days after c1's last ingested hour
    monkeypatch.setattr(timezone, "now", lambda: T0 + 2 * HOUR + timedelta(days=10, minutes=5))
    items = _strip(world.admin)
    # then the two counted findings (the acknowledged one is not), their four job-GPU-hours' money, and the queue
    assert items["waste"].startswith("2 waste findings open or disputed: 4.0 GPU-hours and 10.00 EUR at stake")
    assert 'href="/audit/?start=2026-11-02&amp;end=2026-11-03"' in items["html"]
    # and the one job under the coverage threshold, linked to its table
    assert items["low-coverage"].startswith("1 job under 95 % coverage in this period")
    assert 'href="#flagged-jobs"' in items["html"]
    # and each cluster's ingest: c1 stopped on the world's day, c2 never ran
    assert "c1: ingested through 2026-11-02 02:00 UTC, 10 days behind" in items["ingest"]
    assert "the health check fails" in items["ingest"] and "c2: never ingested" in items["ingest"]
    # and c2's sync error, with its text, and c1's GPU without an energy meter
    assert "Scheduler sync failing on c2: sacct: command not found" in items["scheduler-sync"]
    assert items["no-energy-meter"].startswith("1 GPU with no energy meter")
    assert "GPU-vgpu-1 on c1-n0" in items["no-energy-meter"]


def test_finance_sees_the_fleet_s_items_without_the_sync_error_s_text_or_the_audit_queue(world: FleetWorld) -> None:
    items = _strip(world.finance)
    assert items["waste"].startswith("2 waste findings") and "/audit/" not in items["html"]
    assert "failing on c2" in items["scheduler-sync"] and "sacct" not in items["scheduler-sync"]
    assert "no-energy-meter" in items


def test_a_member_sees_their_teams_findings_jobs_and_clusters_only(world: FleetWorld) -> None:
    items = _strip(world.member)
    # vision's finding on job A (nlp's job B is not theirs), and vision's job C under the threshold
    assert items["waste"].startswith("1 waste finding open or disputed: 2.0 GPU-hours and 5.00 EUR")
    assert "/audit/" not in items["html"]
    assert items["low-coverage"].startswith("1 job under 95 %")
    # the cluster their jobs ran on, not c2; nothing of the fleet's sync or meters
    assert "c1:" in items["ingest"] and "c2" not in items["ingest"]
    assert "scheduler-sync" not in items and "no-energy-meter" not in items


def test_each_item_says_plainly_when_there_is_nothing(world: FleetWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    # given c2 ingested as far as c1, its sync repaired, every GPU metered, and now just past c1's last hour
    IngestWatermark.objects.create(cluster=world.c2, ingested_through=T0 + 2 * HOUR)
    world.c2.scheduler_status = ""
    world.c2.save(update_fields=["scheduler_status"])
    IngestedHour.objects.update(stats={})
    monkeypatch.setattr(timezone, "now", lambda: T0 + 2 * HOUR + timedelta(minutes=5))
    # when an admin opens a day with no job
    items = _strip(world.admin, EMPTY_PERIOD)
    # then
    assert items["waste"] == "No open waste findings in this period."
    assert items["low-coverage"] == "No job under 95 % coverage in this period."
    assert items["ingest"].startswith("Energy ingest up to date: every closed hour is ingested on all 2 clusters.")
    assert items["scheduler-sync"] == "No scheduler sync errors."
    assert items["no-energy-meter"] == "Every GPU in the last hour ingested has an energy meter."
    # and a member with no job that day is told so, not shown the fleet's clusters
    assert _strip(world.member, EMPTY_PERIOD)["ingest"] == "No cluster ran your teams' jobs in this period."


def test_a_cluster_an_hour_behind_is_not_over_the_limit(world: FleetWorld) -> None:
    # given now two hours past c1's watermark (beat not yet through its last closed hour)
    attention = fleet_attention(
        user=world.admin, start=T0, end=T0 + 24 * HOUR, now=T0 + 3 * HOUR + timedelta(minutes=1), low_coverage=0
    )
    lags = {c.cluster: c for c in attention.ingest}
    assert (lags["c1"].lag_h, lags["c1"].over_limit) == (1, False)
    assert (lags["c2"].lag_h, lags["c2"].ingested_through) == (None, None)
    assert [c.cluster for c in attention.behind] == ["c1", "c2"]
    assert attention.waste.cost == [(Decimal("10.00"), "EUR")]


def _page_queries(user: User) -> int:
    cache.clear()  # the kept rollups and heatmap would hide the queries of the second load
    client = Client()
    client.force_login(user)
    with CaptureQueriesContext(connection) as measured:
        assert client.get("/", PERIOD).status_code == 200
    return len(measured)


@pytest.mark.parametrize("role", ["admin", "member"])
def test_the_page_s_queries_do_not_grow_with_gpus_jobs_or_findings(world: FleetWorld, role: str) -> None:
    # given the page's queries on the world
    user = getattr(world, role)
    before = _page_queries(user)
    # when the fleet grows: a node of 8 more GPUs, each with a vision job (a finding, low coverage) in each hour
    node = Node.objects.create(cluster=world.c1, hostname="c1-n9")
    for i in range(8):
        gpu = Gpu.objects.create(node=node, uuid=f"GPU-more-{i}", index=i, model_name="NVIDIA H200")
        job = Job.objects.create(
            cluster=world.c1, job_key=f"slurm/more-{i}", team=world.vision, start=T0, last_seen=T0 + HOUR,
            currency="EUR", sampled_s=1000, expected_s=3600, coverage=0.3,
        )  # fmt: skip
        for h in range(2):
            JobGpuHour.objects.create(job=job, gpu=gpu, hour=T0 + h * HOUR, source="agent", energy_j=1e6,
                                      sampled_s=500, occupancy_s=500, cost=Decimal("1"))  # fmt: skip
            GpuHour.objects.create(gpu=gpu, hour=T0 + h * HOUR, source="agent", device_energy_j=1e6)
        Flag.objects.create(kind="memory_hog", cluster=world.c1, job=job)
    # then the page asks as many queries
    assert _page_queries(user) == before
