"""A gap the agent saw a job on both sides of, on a cluster whose scheduler is not read (apps.telemetry.unobserved,
"agent_span"): the simulator's fleet with an agent outage -> promtool -> a real Prometheus -> the ingest, hour
by hour. The job is charged the time it held the GPU, the unseen part as an estimate; the idle line keeps only
what nobody held."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command

from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, Source
from apps.telemetry.models import GpuHour

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

T0 = datetime(2026, 11, 16, 0, 0, tzinfo=UTC)
HOURS = 5


def bridged_scenario() -> dict[str, Any]:
    """Pods on a cluster with no scheduler read: one through a 30-minute agent outage (seen before and after),
    one whose agent dies before it ends (never seen after: not bridged), one alone and always seen."""
    return {
        "name": "bridged",
        "start": T0.isoformat(),
        "duration": f"{HOURS}h",
        "scrape_interval_s": 15,
        "linger_s": 120,
        "nodes": [{"hostname": "gpu-a", "gpus": 1}, {"hostname": "gpu-b", "gpus": 1}, {"hostname": "gpu-c", "gpus": 1}],
        "jobs": [
            {"scheduler": "k8s", "namespace": "ml", "pod": "train-0", "node": "gpu-a", "gpus": [0], "start": "10m",
             "end": "4h10m", "sm": 80, "power_w": 500},
            {"scheduler": "k8s", "namespace": "ml", "pod": "train-1", "node": "gpu-b", "gpus": [0], "start": "10m",
             "end": "3h", "sm": 70, "power_w": 450},
            {"scheduler": "k8s", "namespace": "ml", "pod": "serve-0", "node": "gpu-c", "gpus": [0], "start": "0m",
             "end": f"{HOURS}h", "sm": 40, "power_w": 300},
        ],
        "faults": [
            {"kind": "agent_down", "node": "gpu-a", "start": "1h50m", "end": "2h20m"},
            {"kind": "agent_down", "node": "gpu-b", "start": "2h", "end": f"{HOURS}h"},
        ],
    }  # fmt: skip


@pytest.fixture
def ingested(history_loader, cluster_for) -> Any:
    history = history_loader(bridged_scenario())
    cluster_for(history)
    # hour by hour, as beat does: the hour after the gap closes it
    for h in range(HOURS):
        hour = T0 + timedelta(hours=h)
        call_command("ingest", start=hour.isoformat(), end=(hour + timedelta(hours=1)).isoformat(), verbosity=0)
    return history


def test_a_gap_seen_on_both_sides_is_charged_to_the_job_as_an_estimate(ingested) -> None:
    job = Job.objects.get(job_key="k8s/ml/train-0")
    # then the pod is charged the 4 GPU-hours it held, not 3.5: the 30 unseen minutes as an estimate
    assert job.gpu_hours == pytest.approx(4.0, rel=0.01)
    estimated = JobGpuHour.objects.filter(job=job, source=Source.ESTIMATED)
    assert sum(r.occupancy_s for r in estimated) == pytest.approx(1800.0, rel=0.02)
    assert set(estimated.values_list("hour", flat=True)) == {T0 + timedelta(hours=1), T0 + timedelta(hours=2)}
    assert job.attribution_j.get(Method.ESTIMATED.value, 0.0) > 0
    # and its energy is its measured energy plus the meter's for the gap: 500 W for 4 hours
    assert job.energy_j == pytest.approx(500.0 * 4 * 3600, rel=0.02)
    # and the GPU's idle line holds none of it
    gap_hours = [T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    for row in GpuHour.objects.filter(gpu__node__hostname="gpu-a", hour__in=gap_hours):
        assert row.estimated_j == pytest.approx(row.unobserved_j, rel=0.02), row
        assert row.jobs_energy_j + row.idle_energy_j + row.unobserved_j == pytest.approx(row.device_energy_j, rel=0.005)


def test_a_job_never_seen_after_its_agent_died_is_not_charged_the_rest(ingested) -> None:
    job = Job.objects.get(job_key="k8s/ml/train-1")
    # seen from 0h10 to 2h00 only: nothing says it held the GPU after, so nothing is estimated
    assert not JobGpuHour.objects.filter(job=job, source=Source.ESTIMATED).exists()
    assert job.gpu_hours == pytest.approx(110 / 60, rel=0.02)


def test_a_job_always_seen_has_no_estimate_and_ingesting_again_changes_nothing(ingested) -> None:
    assert not JobGpuHour.objects.filter(job__job_key="k8s/ml/serve-0", source=Source.ESTIMATED).exists()
    before = sorted(JobGpuHour.objects.values_list("job__job_key", "hour", "source", "occupancy_s", "energy_j"))
    call_command("ingest", start=T0.isoformat(), end=(T0 + timedelta(hours=HOURS)).isoformat(), verbosity=0)
    after = sorted(JobGpuHour.objects.values_list("job__job_key", "hour", "source", "occupancy_s", "energy_j"))
    assert after == before
