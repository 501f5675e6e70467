"""An agent that exports DESIGN section 2's core series but none of docs/metrics.md's extensions (an older
agent during a rolling upgrade) must not book its jobs 0 GPU-hours: the ingest falls back to what the core
series allow, and flags the hours it estimated."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.jobs.models import Job
from apps.pipeline.ingest import hour_ingest
from apps.telemetry.models import GpuHour
from apps.waste.models import Flag
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.django_db, pytest.mark.prometheus]

HOURS = [datetime(2026, 11, 2, h, tzinfo=UTC) for h in range(6)]


def _older_agents(raw: dict) -> dict:
    raw = {**raw, "name": "spine-older-agent"}
    raw["nodes"] = [{**n, "agent_contract": "core"} if n.get("agent", True) else n for n in raw["nodes"]]
    return raw


def _ingest(history_loader, cluster_for, raw: dict, name: str) -> dict[str, Job]:
    cluster = cluster_for(history_loader(raw), name=name)
    for hour in HOURS:
        hour_ingest(cluster=cluster, hour=hour)
    return {j.job_key: j for j in Job.objects.filter(cluster=cluster, source="agent")}


def test_an_older_agent_still_books_gpu_hours_and_says_they_are_estimated(history_loader, cluster_for) -> None:
    # given the same fleet ingested from current agents and from agents without the extension series
    current = _ingest(history_loader, cluster_for, spine_scenario(), "current")
    older = _ingest(history_loader, cluster_for, _older_agents(spine_scenario()), "older")
    assert current.keys() == older.keys() and current
    for key, job in current.items():
        estimated = older[key]
        # then measured energy, from the core counters, is the same to the joule (a current agent's gaps it saw a
        # job on both sides of are charged to the job as estimates besides; an older agent's are not)
        measured = job.energy_j - job.attribution_j.get("estimated", 0.0)
        assert estimated.energy_j == pytest.approx(measured, rel=1e-9), key
        # and GPU-hours are never a silent zero: exact for a job alone on its GPUs, close when shared
        assert estimated.gpu_hours > 0, key
        assert estimated.gpu_hours == pytest.approx(job.gpu_hours, rel=0.15), key
        assert "estimated_occupancy" in estimated.flags and "estimated_occupancy" not in job.flags
    alone = current["slurm/101"]  # two GPUs of its own
    assert older["slurm/101"].gpu_hours == pytest.approx(alone.gpu_hours, rel=0.01)
    # and each GPU-hour says what was missing and which agent it came from
    hours = GpuHour.objects.filter(gpu__node__cluster__name="older", source="agent")
    assert hours.exists()
    for row in hours:
        assert row.agent_version == "0.1.0"
        assert "fleetwatt_job_occupancy_seconds_total" in row.contract_gaps or not row.occupied_s
        assert row.occupied_s <= row.sampled_s + 1e-6  # never more GPU time than the agent watched
    flagged = Flag.objects.filter(kind="estimated_occupancy", cluster__name="older")
    assert flagged.count() == hours.exclude(contract_gaps=[]).count()
    assert flagged.first().evidence["agent_version"] == "0.1.0"
    # the current agents' hours have no gaps and carry their version
    assert not GpuHour.objects.filter(gpu__node__cluster__name="current").exclude(contract_gaps=[]).exists()
