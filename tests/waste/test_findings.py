"""Waste findings from an ingested fleet: a memory hog beside a busy job, an idle allocation, a healthy job."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command

from apps.carbon.models import GpuModel, IntensityHour, ServerType, ServerTypeRule, Site
from apps.fleet.models import Cluster, Node
from apps.jobs.models import Job
from apps.waste.models import Flag

pytestmark = [pytest.mark.django_db, pytest.mark.prometheus]

SCENARIO = {
    "name": "waste",
    "start": "2026-11-02T00:00:00Z",
    "duration": "5h",
    "scrape_interval_s": 15,
    "nodes": [{"hostname": "w1", "gpus": 3}],
    "jobs": [
        {"scheduler": "slurm", "job_id": "1", "account": "nlp", "node": "w1", "gpus": [0], "start": "10m",
         "end": "3h", "sm": 97, "power_w": 690, "memory_gib": 1, "name": "heavy"},
        {"scheduler": "slurm", "job_id": "2", "account": "nlp", "node": "w1", "gpus": [0], "start": "20m",
         "end": "2h50m", "sm": 0.3, "power_w": 80, "memory_gib": 10, "name": "light"},
        {"scheduler": "slurm", "job_id": "3", "account": "vision", "node": "w1", "gpus": [1], "start": "0s",
         "end": "4h", "sm": 1, "power_w": 85, "memory_gib": 2, "name": "forgotten"},
        {"scheduler": "slurm", "job_id": "4", "account": "vision", "node": "w1", "gpus": [2], "start": "30m",
         "end": "4h", "sm": 80, "power_w": 560, "memory_gib": 40, "name": "healthy"},
    ],
}  # fmt: skip


def _ingest() -> None:
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T05:00:00Z", verbosity=0)


@pytest.fixture
def priced_cluster(history_loader, cluster_for):
    history = history_loader(SCENARIO)
    cluster = cluster_for(history)
    site = Site.objects.create(name="dc", grid_zone="DE", pue=1.2, electricity_price_per_kwh=Decimal("0.2"))
    Cluster.objects.filter(pk=cluster.pk).update(site=site)
    GpuModel.objects.create(name="NVIDIA H200", hourly_rate=Decimal("2.80"))
    server = ServerType.objects.create(name="hgx", node_overhead_factor=1.3, embodied_kg_per_server=3000)
    ServerTypeRule.objects.create(cluster=cluster, hostname_glob="w*", server_type=server)
    for h in range(5):
        IntensityHour.objects.create(
            zone="DE", basis="location", hour=f"2026-11-02T0{h}:00:00Z", kg_per_kwh=0.3, source="test"
        )
    _ingest()
    assert not Node.objects.filter(cluster=cluster, server_type__isnull=True).exists()
    return history


def test_hog_idle_allocation_and_healthy(priced_cluster) -> None:
    _ingest()
    heavy, light, forgotten, healthy = (Job.objects.get(job_key=f"slurm/{i}") for i in range(1, 5))
    # the hog gets under 2 % of the GPU's energy, yet blocks half of it
    assert light.energy_j / (light.energy_j + heavy.energy_j) < 0.02
    hog = Flag.objects.get(kind="memory_hog", job=light)
    assert hog.evidence["memory_bytes"] >= 10 * 1024**3
    assert hog.evidence["sm_percent"] < 1
    assert hog.evidence["gpu_hours_blocked"] == pytest.approx(light.gpu_hours)
    assert hog.evidence["gpu_hours_blocked"] == pytest.approx((2 * 3600 + 30 * 60) / 2 / 3600, rel=0.01)
    assert Decimal(hog.evidence["cost"]) == light.cost.quantize(Decimal("0.01")) > 0
    assert set(light.flags) == {"memory_hog"}
    idle = Flag.objects.get(kind="idle_allocation", job=forgotten)
    assert idle.evidence["gpu_hours_blocked"] == pytest.approx(4.0, rel=0.01)
    assert set(forgotten.flags) == {"idle_allocation"}
    assert heavy.flags == [] and healthy.flags == []


def test_reingesting_leaves_the_findings_as_they_were(priced_cluster) -> None:
    before = sorted(Flag.objects.values_list("kind", "job__job_key", "evidence"))
    ids = sorted(Flag.objects.values_list("pk", flat=True))
    _ingest()
    assert sorted(Flag.objects.values_list("kind", "job__job_key", "evidence")) == before
    assert sorted(Flag.objects.values_list("pk", flat=True)) == ids
