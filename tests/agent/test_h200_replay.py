"""The real H200 two-jobs run (docs/agent-h200.md), replayed through the real agent code in CI.

tests/agent/fixtures/h200_two_jobs_trace.jsonl was recorded by `fleetwatt-agent --backend nvml
--record` on an NVIDIA H200 (driver 580.159.04) while `heavy` (8192x8192 fp16 products) and `light`
(holds 10 GiB, a 1024x1024 product every 0.2 s) ran together on GPU 0 for 71 s; see docs/agent-h200.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fleetwatt_agent.backends.replay import ReplayBackend, read_trace
from fleetwatt_agent.model import JobInfo, TickReading
from fleetwatt_agent.sampler import Sampler, SamplerSettings
from fleetwatt_agent.server import jobs_document

from .conftest import FIXTURES
from .testkit import run_all

# Two runs on two H200 machines, both kept: the second with the final code (docs/agent-h200.md).
RUNS = {
    "run2": (FIXTURES / "h200_two_jobs_trace.jsonl", FIXTURES / "h200_two_jobs_report.json"),
    "run1": (FIXTURES / "h200_two_jobs_run1_trace.jsonl", FIXTURES / "h200_two_jobs_run1_report.json"),
}
GIB = 2**30


class Capture:
    def __init__(self) -> None:
        self.outputs: list[list[dict[str, Any]]] = []
        self.memory: dict[str, int] = {}

    def write_tick(self, reading: TickReading, new_jobs: dict[int, JobInfo], outputs: list[dict[str, Any]]) -> None:
        self.outputs.append(outputs)


@pytest.fixture(scope="module", params=sorted(RUNS))
def replayed(request: pytest.FixtureRequest) -> tuple[Sampler, Capture, dict[str, Any], Any]:
    trace, report = RUNS[request.param]
    header, _ = read_trace(trace)
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    info = backend.open()
    capture = Capture()
    sampler = Sampler(
        backend,
        info,
        backend.resolver(),
        SamplerSettings(
            hostname="h200", interval_s=header["interval_s"], energy_interval_s=header["energy_interval_s"]
        ),
        sink=capture,
    )
    run_all(sampler)
    return sampler, capture, json.loads(report.read_text()), trace


def test_trace_is_the_h200_recording(replayed: Any) -> None:
    trace = replayed[3]
    header, ticks = read_trace(trace)
    assert header["backend"] == "nvml" and header["driver"] == "580.159.04"
    assert header["gpus"][0]["name"] == "NVIDIA H200"
    assert trace.stat().st_size < 2 * 2**20
    assert len(ticks) >= 90


def test_heavy_gets_at_least_98_percent_and_light_at_most_2(replayed: Any) -> None:
    sampler, _, report, _ = replayed
    jobs = sampler.gpus[0].jobs
    heavy = jobs[report["heavy_job_key"]].energy_total_j()
    light = jobs[report["light_job_key"]].energy_total_j()
    assert heavy / (heavy + light) >= 0.98
    assert light / (heavy + light) <= 0.02
    # and the replay gives the joules the live agent reported on the H200
    assert heavy == pytest.approx(report["energy_j"]["heavy"], rel=1e-9)
    assert light == pytest.approx(report["energy_j"]["light"], abs=1e-6)


def test_light_held_at_least_10_gib(replayed: Any) -> None:
    _, _, report, trace = replayed
    _, ticks = read_trace(trace)
    light_pid = next(
        int(pid) for rec in ticks for pid, job in rec["jobs"].items() if job["job_key"] == report["light_job_key"]
    )
    held = max(p[1] for rec in ticks for p in rec["gpus"][0]["processes"] if p[0] == light_pid)
    assert held >= 10 * GIB


def test_sm_time_in_every_sample_while_both_ran(replayed: Any) -> None:
    _, capture, report, _ = replayed
    both = [
        out["jobs"]
        for outs in capture.outputs
        for out in outs
        if report["heavy_job_key"] in out.get("jobs", {}) and report["light_job_key"] in out.get("jobs", {})
    ]
    assert len(both) >= 60
    assert {method for jobs in both for method, _ in jobs.values()} == {"sm_time"}


def test_coverage_at_least_095_for_both(replayed: Any) -> None:
    sampler, _, report, _ = replayed
    doc = {j["job_key"]: j for j in jobs_document(sampler.snapshot())["jobs"]}
    assert doc[report["heavy_job_key"]]["coverage"] >= 0.95
    assert doc[report["light_job_key"]]["coverage"] >= 0.95
    assert doc[report["light_job_key"]]["attribution"] == "sm_time"


def test_invariant_on_every_sample_and_energy_equals_the_counter(replayed: Any) -> None:
    sampler, capture, _, trace = replayed
    samples = [out for outs in capture.outputs for out in outs if "sample_j" in out]
    assert len(samples) >= 90
    for out in samples:
        parts = sum(j for _, j in out["jobs"].values()) + out["idle_j"]
        assert parts == pytest.approx(out["sample_j"], rel=1e-12, abs=1e-9)
    led = sampler.gpus[0]
    assert led.energy_j == pytest.approx(led.idle_j + sum(j.energy_total_j(False) for j in led.jobs.values()))
    # the committed energy is exactly the driver counter's delta between its first and last reads
    _, ticks = read_trace(trace)
    reads = [g["energy_mj"] for rec in ticks for g in rec["gpus"] if g["energy_mj"] is not None]
    assert led.energy_j == pytest.approx((reads[-1] - reads[0]) / 1000.0, rel=1e-9)


def test_replay_reproduces_the_recorded_split(replayed: Any) -> None:
    _, capture, _, trace = replayed
    _, ticks = read_trace(trace)
    assert len(capture.outputs) == len(ticks)
    for recorded, replayed_outs in zip((rec["split"] for rec in ticks), capture.outputs, strict=True):
        assert len(recorded) == len(replayed_outs)
        for a, b in zip(recorded, replayed_outs, strict=True):
            assert a.get("sample_j") == pytest.approx(b.get("sample_j"))
            assert {k: v[0] for k, v in a.get("jobs", {}).items()} == {k: v[0] for k, v in b.get("jobs", {}).items()}
            assert ("commit" in a) == ("commit" in b)
