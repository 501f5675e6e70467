"""Linger, job start times, replay time shifting, trace versions, missed ticks and the flags' environment
fallbacks."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from fleetwatt_agent.backends.replay import ReplayBackend, read_trace
from fleetwatt_agent.collector import make_registry
from fleetwatt_agent.config import load
from fleetwatt_agent.errors import ConfigError
from fleetwatt_agent.model import JobInfo
from fleetwatt_agent.sampler import Sampler, SamplerSettings
from prometheus_client import generate_latest

from .testkit import gpu, make_sampler, run_all, tick, write_trace


def job_series(sampler, key: str) -> list[str]:  # type: ignore[no-untyped-def]
    text = generate_latest(make_registry(sampler.snapshot, process_metrics=False)).decode()
    return [line for line in text.splitlines() if f'job_key="{key}"' in line]


def test_a_job_that_left_lingers_then_is_dropped() -> None:
    # given job a on the GPU for 5 s, then gone; linger 10 s
    ticks = [tick(i, [gpu(energy_mj=100_000 * i, procs=[(1, 10, 50.0)] if i <= 5 else [])]) for i in range(0, 30)]
    sampler, _ = make_sampler(
        ticks, jobs={1: "slurm/1"}, settings=SamplerSettings(hostname="h", energy_interval_s=0.0, linger_s=10.0)
    )
    seen_at = {}
    for i in range(30):
        sampler.tick()
        seen_at[i] = bool(job_series(sampler, "slurm/1"))
    # then its series, with their final values, stay until 10 s after it left, then go
    assert all(seen_at[i] for i in range(0, 15))
    assert not any(seen_at[i] for i in range(16, 30))
    assert "slurm/1" not in sampler.jobs


def test_final_values_stay_exported_while_lingering() -> None:
    ticks = [tick(i, [gpu(energy_mj=100_000 * i, procs=[(1, 10, 50.0)] if i <= 3 else [])]) for i in range(0, 8)]
    sampler, _ = make_sampler(
        ticks, jobs={1: "slurm/1"}, settings=SamplerSettings(hostname="h", energy_interval_s=0.0, linger_s=300.0)
    )
    for _ in ticks:
        sampler.tick()
    lines = job_series(sampler, "slurm/1")
    energy = [line for line in lines if line.startswith("fleetwatt_job_energy_joules_total")]
    assert energy == [
        'fleetwatt_job_energy_joules_total{gpu="0",hostname="h",job_key="slurm/1",method="whole_gpu",'
        'uuid="GPU-test-0"} 300.0'
    ]
    assert any(
        line.startswith("fleetwatt_job_last_seen_time_seconds") and line.endswith(" 1.800000003e+09") for line in lines
    )


def test_a_job_back_within_linger_continues_after_linger_restarts_at_zero() -> None:
    def present(i: int) -> bool:
        return i <= 2 or 5 <= i <= 6 or i >= 20

    ticks = [tick(i, [gpu(energy_mj=100_000 * i, procs=[(1, 10, 50.0)] if present(i) else [])]) for i in range(23)]
    sampler, _ = make_sampler(
        ticks, jobs={1: "slurm/1"}, settings=SamplerSettings(hostname="h", energy_interval_s=0.0, linger_s=5.0)
    )
    for i in range(23):
        sampler.tick()
        if i == 6:
            # back within 5 s: the same series, counting on (2 s before + 2 s now)
            assert sampler.gpus[0].jobs["slurm/1"].energy_j["whole_gpu"] == pytest.approx(400.0)
    # dropped at t=11, back at t=20: a new series from 0 (the app treats it as a counter reset)
    assert sampler.gpus[0].jobs["slurm/1"].energy_j["whole_gpu"] == pytest.approx(300.0)


def test_job_start_is_the_oldest_process_unless_the_scheduler_says() -> None:
    ticks = [tick(0, [gpu(procs=[(1, 1, None)])]), tick(1, [gpu(procs=[(1, 1, None), (2, 1, None)])])]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/1"}, starts={1: 500.0, 2: 400.0})
    for _ in ticks:
        sampler.tick()
    assert sampler.jobs["slurm/1"].start_time == 400.0


def test_replay_shifts_every_time_to_now_unless_asked_to_keep_them(tmp_path: Path) -> None:
    ticks = [tick(i, [gpu(energy_mj=1000 * i, procs=[(5, 1, 10.0)])], wall0=1_000_000_000.0) for i in range(3)]
    trace = write_trace(tmp_path / "t.jsonl", ticks, {5: JobInfo("slurm/5", start_time=999_999_990.0)})
    shifted = ReplayBackend(trace, speed=0)
    shifted.open()
    first = shifted.read(read_energy=True)
    assert abs(first.wall - time.time()) < 5
    assert shifted.resolver().resolve(5).start_time == pytest.approx(first.wall - 10.0)
    kept = ReplayBackend(trace, speed=0, keep_time=True)
    kept.open()
    assert kept.read(read_energy=True).wall == 1_000_000_000.0
    assert kept.resolver().resolve(5).start_time == 999_999_990.0


def test_a_trace_keeps_the_power_limit_and_sm_clock_and_an_older_one_replays_without(tmp_path: Path) -> None:
    # given a recorded tick with the GPU's settings, and one recorded before they were read
    with_settings = replace(gpu(energy_mj=1000), power_limit_w=450.0, sm_clock_mhz=1755.0)
    trace = write_trace(tmp_path / "t.jsonl", [tick(0, [with_settings]), tick(1, [gpu(energy_mj=2000)])], {})
    # when replayed
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    backend.open()
    first, second = backend.read(read_energy=True), backend.read(read_energy=True)
    # then the first reads them back, the second has them unknown (no series exported), never 0
    assert (first.gpus[0].power_limit_w, first.gpus[0].sm_clock_mhz) == (450.0, 1755.0)
    assert (second.gpus[0].power_limit_w, second.gpus[0].sm_clock_mhz) == (None, None)


def test_a_version_1_trace_replays_without_memory_activity(tmp_path: Path) -> None:
    # given a trace as agents before the power model wrote it: version 1, three fields per process
    trace = tmp_path / "v1.jsonl"
    header = {"format": "fleetwatt-agent-trace", "version": 1, "backend": "nvml", "driver": "580", "hostname": "h",
              "process_utilization": "supported", "accounting_mode": "disabled", "interval_s": 1.0,
              "energy_interval_s": 0.0, "gpus": [{"index": 0, "uuid": "GPU-0", "name": "NVIDIA H200",
                                                   "energy_counter": False, "mig": False}]}  # fmt: skip
    records = [
        {"t": 1_000_000_000.0 + i, "mono": 100.0 + i, "jobs": {"7": {"job_key": "slurm/7"}, "8": {"job_key": "slurm/8"}}
         if i == 0 else {}, "gpus": [{"index": 0, "power_w": 400.0, "memory_used_bytes": 0, "energy_mj": None,
                                       "signal": "sm", "activity_missing": False,
                                       "processes": [[7, 2**30, 75.0], [8, 2**30, 25.0]]}]}
        for i in range(4)
    ]  # fmt: skip
    trace.write_text("\n".join(json.dumps(r) for r in [header, *records]) + "\n")
    # when it is read, and replayed under sm_mem
    reader = ReplayBackend(trace, speed=0, keep_time=True)
    reader.open()
    first = reader.read(read_energy=True)
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    settings = SamplerSettings(hostname="h", energy_interval_s=0.0, split="sm_mem")
    sampler = Sampler(backend, backend.open(), backend.resolver(), settings)
    run_all(sampler)
    # then its processes have no memory activity, and the split is sm_time, as it was recorded
    assert [(p.pid, p.activity_pct, p.mem_activity_pct) for p in first.gpus[0].processes] == [
        (7, 75.0, None),
        (8, 25.0, None),
    ]
    jobs = sampler.gpus[0].jobs
    assert jobs["slurm/7"].energy_j == {"sm_time": pytest.approx(3 * 300.0)}
    assert sampler.power_models["NVIDIA H200"].n == 0  # nothing to calibrate from


def test_a_version_2_trace_carries_memory_activity_through_record_and_replay(tmp_path: Path) -> None:
    # given a version-2 trace: a job alone (enough to calibrate), then two together
    alone = [(float(10 + (i * 37) % 90), float((i * 53) % 80)) for i in range(70)]
    ticks = [
        tick(i, [gpu(power_w=150 + 4 * sm + 2 * mem, procs=[(1, 2**30, sm, mem)])]) for i, (sm, mem) in enumerate(alone)
    ]
    ticks += [
        tick(70 + i, [gpu(power_w=700, procs=[(1, 2**30, 80.0, 20.0), (2, 2**30, 40.0, 90.0)])]) for i in range(3)
    ]
    trace = write_trace(tmp_path / "v2.jsonl", ticks, {1: JobInfo("slurm/1"), 2: JobInfo("slurm/2")})
    header, records = read_trace(trace)
    assert header["version"] == 2 and records[-1]["gpus"][0]["processes"][1] == [2, 2**30, 40.0, 90.0]
    # when it is replayed under sm_mem
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    info = backend.open()
    sampler = Sampler(
        backend, info, backend.resolver(), SamplerSettings(hostname="h", energy_interval_s=0.0, split="sm_mem")
    )
    run_all(sampler)
    # then the memory activity came through: the model calibrated and the shared seconds follow it
    assert sampler.power_models["Test GPU"].n == 69
    job = sampler.gpus[0].jobs["slurm/2"]
    assert set(job.energy_j) | set(job.pending_j) == {"sm_mem"}


def test_replay_in_real_time_paces_itself(tmp_path: Path) -> None:
    ticks = [tick(i * 0.1, [gpu()]) for i in range(4)]
    backend = ReplayBackend(write_trace(tmp_path / "t.jsonl", ticks, {}), speed=1.0)
    backend.open()
    start = time.monotonic()
    for _ in ticks:
        backend.read(read_energy=True)
    assert time.monotonic() - start >= 0.28


def test_overrun_ticks_are_counted_as_missed() -> None:
    class SlowBackend:
        name, self_paced = "slow", False

        def __init__(self) -> None:
            self.n = 0

        def read(self, *, read_energy: bool):  # type: ignore[no-untyped-def]
            self.n += 1
            if self.n == 2:
                time.sleep(0.35)  # one slow driver call
            return tick(time.monotonic(), [gpu()])

    sampler, _ = make_sampler([], settings=SamplerSettings(hostname="h", interval_s=0.1))
    sampler.backend = SlowBackend()  # type: ignore[assignment]
    stop = threading.Event()
    thread = threading.Thread(target=sampler.run, args=(stop,))
    thread.start()
    time.sleep(0.8)
    stop.set()
    thread.join()
    assert sampler.missed_total >= 2
    assert sampler.samples_total >= 3


def test_flags_fall_back_to_the_environment() -> None:
    env = {
        "FLEETWATT_AGENT_LINGER": "42",
        "FLEETWATT_AGENT_LISTEN": "0.0.0.0:9000",
        "FLEETWATT_AGENT_ALLOW_UNAUTHENTICATED": "1",  # a non-loopback address without a token is refused
        "FLEETWATT_AGENT_BACKEND": "replay",
        "FLEETWATT_AGENT_REPLAY": "x.jsonl",
        "FLEETWATT_AGENT_HOSTNAME": "node-1",
        "FLEETWATT_AGENT_ENERGY_INTERVAL": "5",
    }
    cfg = load([], env)
    assert (
        cfg.linger_s,
        cfg.listen_host,
        cfg.listen_port,
        cfg.backend,
        cfg.replay,
        cfg.hostname,
        cfg.energy_interval_s,
    ) == (42.0, "0.0.0.0", 9000, "replay", "x.jsonl", "node-1", 5.0)
    assert load(["--linger", "7"], env).linger_s == 7.0  # a flag beats the environment
    defaults = load([], {})
    assert (defaults.listen_host, defaults.listen_port, defaults.linger_s, defaults.interval_s) == (
        "127.0.0.1",
        9877,
        300.0,
        1.0,
    )
    with pytest.raises(ConfigError):
        load(["--backend", "replay"], {})
    with pytest.raises(ConfigError):
        load(["--listen", "nowhere"], {})


def test_the_split_and_the_power_model_file_are_settings() -> None:
    defaults = load([], {})
    assert (defaults.split, defaults.power_model_file) == ("sm_time", None)
    env = {"FLEETWATT_AGENT_SPLIT": "sm_mem", "FLEETWATT_AGENT_POWER_MODEL_FILE": "/var/lib/fleetwatt-agent/pm.json"}
    cfg = load([], env)
    assert (cfg.split, cfg.power_model_file) == ("sm_mem", "/var/lib/fleetwatt-agent/pm.json")
    assert load(["--split", "sm_time"], env).split == "sm_time"  # a flag beats the environment
    with pytest.raises(ConfigError):
        load(["--split", "sm_magic"], {})
    with pytest.raises(ConfigError, match="--split wants one of sm_time, sm_mem"):
        load([], {"FLEETWATT_AGENT_SPLIT": "sm_magic"})
