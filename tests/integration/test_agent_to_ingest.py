"""The app consumes the agent's output unchanged: the real H200 trace replayed through the real agent
process, scraped by a real Prometheus, ingested by the real ingest, gives the agent's own per-job split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from apps.fleet.models import Cluster
from apps.jobs.models import Job
from apps.pipeline.ingest import hour_ingest
from apps.simulator.local_prometheus import LocalPrometheus, config_write, free_port
from apps.telemetry.models import GpuHour
from apps.telemetry.services import HOUR, hour_floor

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests/agent/fixtures/h200_two_jobs_trace.jsonl"
REPORT = json.loads((ROOT / "tests/agent/fixtures/h200_two_jobs_report.json").read_text())
SPEED = 5  # the 100-second recording in 20 seconds; the agent's clock runs at the same pace


RECORDING_S = 100  # the trace's length, which the agent's clock covers while the wall clock covers a fifth of it


@pytest.fixture
def agent():
    # The agent stamps its gauges (a job's last sample) by its own clock, SPEED times ahead of the wall clock that
    # stamps the scrapes: a replay started in an hour's last RECORDING_S seconds would see its jobs into an hour
    # the ingest has no sample of yet (not watched: lower coverage). Such a start waits for the next hour.
    now = datetime.now(UTC)
    left_in_hour = (hour_floor(now) + HOUR - now).total_seconds()
    if left_in_hour < RECORDING_S + 10:
        time.sleep(left_in_hour + 1)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwatt_agent",
            "--backend",
            "replay",
            "--replay",
            str(TRACE),
            "--replay-speed",
            str(SPEED),
            "--listen",
            f"127.0.0.1:{port}",
            "--hostname",
            "h200-node",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "agent")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if requests.get(f"{url}/healthz", timeout=1).ok:
                break
        except requests.RequestException:
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_ingest_finds_the_agents_split(agent: str, tmp_path: Path) -> None:
    # given a Prometheus scraping the agent every second while it replays the H200 run
    started = datetime.now(UTC)
    config_write(tmp_path / "prometheus.yml", targets=[agent.removeprefix("http://")], scrape_interval_s=1)
    prometheus = LocalPrometheus(tmp_path / "data", tmp_path / "prometheus.yml", free_port())
    prometheus.start(log=tmp_path / "prometheus.log")
    try:
        deadline = time.monotonic() + 120
        while not requests.get(f"{agent}/healthz", timeout=2).json().get("replay_done"):
            assert time.monotonic() < deadline, "the replay did not finish"
            time.sleep(0.5)
        time.sleep(3)  # a few scrapes of the final values
        jobs_doc = requests.get(f"{agent}/jobs", timeout=2).json()
        cluster = Cluster.objects.create(name="h200", prometheus_url=prometheus.url, scrape_interval_s=1)
        # when the hours it ran in are ingested (the current one included, which is why the service is
        # called directly: the command only takes closed hours)
        hour = hour_floor(started)
        while hour <= hour_floor(datetime.now(UTC)):
            hour_ingest(cluster=cluster, hour=hour)
            hour += HOUR
    finally:
        prometheus.stop()

    # then the jobs, their energy and split are the agent's own
    heavy = Job.objects.get(job_key=REPORT["heavy_job_key"])
    light = Job.objects.get(job_key=REPORT["light_job_key"])
    assert heavy.energy_j == pytest.approx(REPORT["energy_j"]["heavy"], rel=1e-6)
    assert light.energy_j == pytest.approx(REPORT["energy_j"]["light"], abs=1.0)
    assert heavy.energy_j / (heavy.energy_j + light.energy_j) >= 0.98
    assert heavy.attribution_j.keys() == {"whole_gpu", "sm_time"}
    assert heavy.attribution == "sm_time"
    for job in (heavy, light):
        assert job.coverage >= 0.95
        assert job.source == "agent"
    agent_jobs = {j["job_key"]: j for j in jobs_doc["jobs"]} if isinstance(jobs_doc.get("jobs"), list) else {}
    if agent_jobs:
        for job in (heavy, light):
            gpus = agent_jobs[job.job_key]["gpus"]
            assert job.sampled_s == pytest.approx(sum(g["sampled_s"] for g in gpus), abs=1.5)
    # and jobs + idle = device energy for the GPU's hours
    for row in GpuHour.objects.all():
        assert row.jobs_energy_j + row.idle_energy_j == pytest.approx(row.device_energy_j, rel=1e-6)
    assert sum(r.jobs_energy_j for r in GpuHour.objects.all()) == pytest.approx(
        heavy.energy_j + light.energy_j, rel=1e-9
    )
