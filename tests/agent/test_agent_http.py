"""/metrics, /jobs and /healthz served over real HTTP by the real command, on the replay backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetwatt_agent.model import JobInfo
from prometheus_client.parser import text_string_to_metric_families

from .conftest import AGENT_SRC
from .httpkit import agent_env, running_agent
from .testkit import gpu, tick, write_trace

GPU_LABELS = {"hostname", "gpu", "uuid"}
JOB_GPU_LABELS = GPU_LABELS | {"job_key"}
CONTRACT = {
    "fleetwatt_gpu_energy_joules": ("counter", GPU_LABELS),
    "fleetwatt_gpu_idle_energy_joules": ("counter", GPU_LABELS),
    "fleetwatt_gpu_power_watts": ("gauge", GPU_LABELS),
    "fleetwatt_gpu_memory_used_bytes": ("gauge", GPU_LABELS),
    "fleetwatt_gpu_energy_counter_resets": ("counter", GPU_LABELS),
    "fleetwatt_gpu_sampled_seconds": ("counter", GPU_LABELS),
    "fleetwatt_job_energy_joules": ("counter", JOB_GPU_LABELS | {"method"}),
    "fleetwatt_job_sampled_seconds": ("counter", JOB_GPU_LABELS),
    "fleetwatt_job_sm_seconds": ("counter", JOB_GPU_LABELS),
    "fleetwatt_job_occupancy_seconds": ("counter", JOB_GPU_LABELS),
    "fleetwatt_job_last_seen_time_seconds": ("gauge", JOB_GPU_LABELS),
    "fleetwatt_job_gpu_memory_bytes": ("gauge", JOB_GPU_LABELS),
    "fleetwatt_job_start_time_seconds": ("gauge", {"hostname", "job_key"}),
    "fleetwatt_job_info": (
        "gauge",
        {"hostname", "job_key", "scheduler", "job_id", "user", "account", "namespace", "pod", "name"},
    ),
    "fleetwatt_agent_info": ("gauge", {"hostname", "version", "backend", "process_utilization", "accounting_mode"}),
    "fleetwatt_agent_samples": ("counter", {"hostname"}),
    "fleetwatt_agent_missed_samples": ("counter", {"hostname"}),
    "fleetwatt_agent_power_model_samples": ("gauge", {"hostname", "gpu_model"}),
    "fleetwatt_agent_power_model_calibrated": ("gauge", {"hostname", "gpu_model"}),
}


def make_trace(path: Path) -> Path:
    ticks = [tick(0, [gpu(0, energy_mj=0), gpu(1, energy_mj=0)])]
    for i in range(1, 21):
        g0 = [(11, 4 * 2**30, 80.0), (12, 2**30, 20.0)] if i <= 15 else []
        g1 = [(21, 8 * 2**30, 0.0)]
        ticks.append(
            tick(
                i,
                [
                    gpu(0, power_w=500, energy_mj=500_000 * i, procs=g0),
                    gpu(1, power_w=90, energy_mj=90_000 * i, procs=g1),
                ],
            )
        )
    jobs = {
        11: JobInfo("slurm/4242", "slurm", "4242", "ada", "physics", "", "", "train", 1_799_999_000.0, True),
        12: JobInfo("k8s/ml/infer-0", "kubernetes", "uid-1", "", "", "ml", "infer-0", "infer-0", 1_799_999_900.0),
        21: JobInfo("container/0123456789ab", "container", "0123456789ab", "bob", start_time=1_799_999_950.0),
    }
    return write_trace(path, ticks, jobs, n_gpus=2)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    trace = make_trace(tmp_path_factory.mktemp("trace") / "two_gpus.jsonl")
    args = ["--replay-keep-time", "--listen", "127.0.0.1:0", "--hostname", "node-7"]
    with running_agent(trace, args, env=agent_env(FLEETWATT_AGENT_LINGER="600")) as port:
        yield f"http://127.0.0.1:{port}"


def get(url: str, accept: str | None = None) -> str:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(response.read().decode())


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_follow_the_contract(agent: str) -> None:
    fams = families(get(agent + "/metrics"))
    for name, (kind, labels) in CONTRACT.items():
        assert name in fams, name
        fam = fams[name]
        assert fam.type == kind, name
        assert fam.samples, name
        for sample in fam.samples:
            if sample.name.endswith("_created"):
                continue
            assert set(sample.labels) == labels, (name, sample.labels)
            assert "job" not in sample.labels and "instance" not in sample.labels
    methods = {s.labels["method"] for s in fams["fleetwatt_job_energy_joules"].samples}
    assert methods <= {"whole_gpu", "sm_time", "sm_mem", "busy_time", "memory"}


def test_metrics_values_split_and_add_up(agent: str) -> None:
    fams = families(get(agent + "/metrics"))

    def value(name: str, **labels: str) -> float:
        return sum(
            s.value
            for s in fams[name].samples
            if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created")
        )

    # GPU 0: 15 s of two jobs split 80/20 by SM, then 5 s idle; GPU 1: one job alone, 20 s
    assert value("fleetwatt_gpu_energy_joules", gpu="0") == pytest.approx(10_000.0)
    assert value("fleetwatt_job_energy_joules", gpu="0", job_key="slurm/4242", method="sm_time") == pytest.approx(
        6000.0
    )
    assert value("fleetwatt_job_energy_joules", gpu="0", job_key="k8s/ml/infer-0", method="sm_time") == pytest.approx(
        1500.0
    )
    assert value("fleetwatt_gpu_idle_energy_joules", gpu="0") == pytest.approx(2500.0)
    assert value(
        "fleetwatt_job_energy_joules", gpu="1", job_key="container/0123456789ab", method="whole_gpu"
    ) == pytest.approx(1800.0)
    for g in ("0", "1"):
        assert value("fleetwatt_job_energy_joules", gpu=g) + value(
            "fleetwatt_gpu_idle_energy_joules", gpu=g
        ) == pytest.approx(value("fleetwatt_gpu_energy_joules", gpu=g))
    assert value("fleetwatt_job_occupancy_seconds", gpu="0", job_key="slurm/4242") == pytest.approx(7.5)
    assert value("fleetwatt_job_sampled_seconds", gpu="0", job_key="slurm/4242") == pytest.approx(15.0)
    assert value("fleetwatt_job_sm_seconds", gpu="0", job_key="slurm/4242") == pytest.approx(12.0)
    assert value("fleetwatt_gpu_sampled_seconds", gpu="0") == pytest.approx(20.0)
    assert value("fleetwatt_job_gpu_memory_bytes", gpu="0", job_key="slurm/4242") == 0  # it has left
    assert value("fleetwatt_job_gpu_memory_bytes", gpu="1") == 8 * 2**30
    assert value("fleetwatt_job_start_time_seconds", job_key="slurm/4242") == 1_799_999_000.0
    assert value("fleetwatt_job_last_seen_time_seconds", gpu="0", job_key="slurm/4242") == 1_800_000_015.0
    info = next(s for s in fams["fleetwatt_job_info"].samples if s.labels["job_key"] == "slurm/4242")
    assert info.labels == {
        "hostname": "node-7",
        "job_key": "slurm/4242",
        "scheduler": "slurm",
        "job_id": "4242",
        "user": "ada",
        "account": "physics",
        "namespace": "",
        "pod": "",
        "name": "train",
    }
    agent_info = fams["fleetwatt_agent_info"].samples[0].labels
    assert agent_info["backend"] == "replay" and agent_info["process_utilization"] == "supported"
    assert value("fleetwatt_agent_samples") == 21


def test_openmetrics_is_served_when_asked(agent: str) -> None:
    text = get(agent + "/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert text.rstrip().endswith("# EOF")
    assert "fleetwatt_job_energy_joules_total{" in text


def test_jobs_json(agent: str) -> None:
    doc = json.loads(get(agent + "/jobs"))
    assert doc["hostname"] == "node-7" and doc["backend"] == "replay"
    jobs = {j["job_key"]: j for j in doc["jobs"]}
    assert set(jobs) == {"slurm/4242", "k8s/ml/infer-0", "container/0123456789ab"}
    slurm = jobs["slurm/4242"]
    assert slurm["energy_j"] == pytest.approx(6000.0)
    assert slurm["attribution"] == "sm_time"
    assert slurm["energy_by_method_j"] == {"sm_time": pytest.approx(6000.0)}
    assert slurm["start_time"] == 1_799_999_000.0 and slurm["user"] == "ada"
    assert slurm["present"] is False
    # started before the agent's first sample: its unseen time lowers its coverage
    assert slurm["coverage"] == pytest.approx(15.0 / 1015.0)
    gpu1 = jobs["container/0123456789ab"]["gpus"][0]
    assert gpu1["attribution"] == "whole_gpu" and gpu1["memory_bytes"] == 8 * 2**30 and gpu1["present"]
    assert [g["gpu"] for g in doc["gpus"]] == ["0", "1"]


def test_healthz_and_unknown_paths(agent: str) -> None:
    health = json.loads(get(agent + "/healthz"))
    assert health["status"] == "ok" and health["samples_total"] == 21
    with pytest.raises(urllib.error.HTTPError) as err:
        get(agent + "/nope")
    assert err.value.code == 404


def test_record_from_replay_round_trips_and_exits_when_asked(tmp_path: Path) -> None:
    # given a trace, replayed by the real command with --record and --replay-exit
    from fleetwatt_agent.backends.replay import read_trace

    source = make_trace(tmp_path / "source.jsonl")
    copy = tmp_path / "copy.jsonl"
    env = {**os.environ, "PYTHONPATH": str(AGENT_SRC)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwatt_agent",
            "--backend",
            "replay",
            "--replay",
            str(source),
            "--replay-speed",
            "0",
            "--replay-keep-time",
            "--replay-exit",
            "--record",
            str(copy),
            "--listen",
            "127.0.0.1:0",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # then it exits 0 at the end, and its recording is the same trace, with the agent's split added
    assert proc.returncode == 0, proc.stderr
    head, ticks = read_trace(copy)
    _, original = read_trace(source)
    assert head["backend"] == "replay" and len(ticks) == len(original) == 21
    for a, b in zip(ticks, original, strict=True):
        assert (a["t"], a["gpus"]) == (b["t"], b["gpus"])
    assert sum(
        o["commit"]["total_j"] for t in ticks for o in t["split"] if o["index"] == 0 and "commit" in o
    ) == pytest.approx(10_000.0)
