"""The NVML backend against a fake pynvml: presence, NOT_FOUND, unsupported counter, lost GPU, no
setting ever changed, and the command line on a machine without the driver."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import ModuleType
from typing import Any

import pytest
from fleetwatt_agent import errors
from fleetwatt_agent.backends.nvml import NvmlBackend, mean_activity
from fleetwatt_agent.collector import make_registry
from fleetwatt_agent.sampler import Sampler, SamplerSettings
from prometheus_client import generate_latest

from .conftest import AGENT_SRC
from .testkit import MapResolver

GIB = 2**30


class RecordingModule:
    """Proxies a module and records every attribute the backend uses."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.used.add(name)
        return getattr(self._module, name)


def sampler_on(nvml: Any, jobs: dict[int, str]) -> tuple[Sampler, NvmlBackend]:
    backend = NvmlBackend(nvml=nvml)
    info = backend.open()
    sampler = Sampler(backend, info, MapResolver(jobs), SamplerSettings(hostname="n", energy_interval_s=0.0))
    return sampler, backend


def test_open_describes_the_node(fake_nvml: ModuleType) -> None:
    info = NvmlBackend(nvml=fake_nvml).open()
    assert info.backend == "nvml"
    assert info.driver == "999.99.99"
    assert [g.uuid for g in info.gpus] == ["GPU-fake-0000"]
    assert info.gpus[0].energy_counter
    assert info.process_utilization == "supported"
    assert info.accounting_mode == "disabled"


def test_not_found_means_no_samples_not_a_failure(fake_nvml: ModuleType) -> None:
    # given two processes on the GPU and no utilisation sample since the last call
    g = fake_nvml.GPUS[0]
    g.procs = {10: 2 * GIB, 20: 6 * GIB}
    g.sm = {}
    backend = NvmlBackend(nvml=fake_nvml)
    backend.open()
    # when
    reading = backend.read(read_energy=False).gpus[0]
    # then the reading is there, flagged as "no samples", and nobody has activity
    assert reading.activity_missing
    assert [(p.pid, p.activity_pct) for p in reading.processes] == [(10, None), (20, None)]
    with pytest.raises(errors.NvmlNotFound):
        backend._call("nvmlDeviceGetProcessUtilization", 0, 0)


def test_no_samples_reuses_the_last_activity_once_then_splits_by_memory(fake_nvml: ModuleType) -> None:
    g = fake_nvml.GPUS[0]
    g.procs = {10: 1 * GIB, 20: 3 * GIB}
    sampler, _ = sampler_on(fake_nvml, {10: "heavy", 20: "light"})
    sampler.tick()  # baseline
    methods = []
    for sm in ({10: 99}, {}, {}, {10: 99}):
        g.sm = sm
        g.energy_mj += 100_000
        sampler.tick()
        jobs = sampler.gpus[0].jobs
        methods.append(sorted({m for j in jobs.values() for m, v in j.energy_j.items() if v > 0}))
    led = sampler.gpus[0]
    # the second second reused heavy's 99 %, the third had no signal at all: memory (1:3)
    assert led.jobs["heavy"].energy_j["sm_time"] == pytest.approx(300.0)
    assert led.jobs["heavy"].energy_j["memory"] == pytest.approx(25.0)
    assert led.jobs["light"].energy_j["memory"] == pytest.approx(75.0)
    assert led.jobs["light"].energy_j["sm_time"] == pytest.approx(0.0)


class SteppedClock:
    """Stands in for the time module in the backend: one second per read."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now - 1_799_000_000.0


def test_processes_appearing_and_vanishing_between_ticks(
    fake_nvml: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fleetwatt_agent.backends.nvml as nvml_mod

    clock = SteppedClock()
    monkeypatch.setattr(nvml_mod, "time", clock)
    g = fake_nvml.GPUS[0]
    sampler, _ = sampler_on(fake_nvml, {1: "a", 2: "b"})
    script = [
        ({}, {}),  # baseline: idle
        ({1: GIB}, {1: 50}),  # a appears
        ({1: GIB, 2: GIB}, {1: 75, 2: 25}),  # b joins
        ({2: GIB}, {2: 40}),  # a has gone
        ({}, {}),  # idle again
    ]
    for procs, sm in script:
        g.procs, g.sm = procs, sm
        g.energy_mj += 1_000_000
        sampler.tick()
        clock.now += 1.0
    led = sampler.gpus[0]
    a, b = led.jobs["a"], led.jobs["b"]
    assert a.energy_j == {"whole_gpu": pytest.approx(1000.0), "sm_time": pytest.approx(750.0)}
    assert b.energy_j == {"sm_time": pytest.approx(250.0), "whole_gpu": pytest.approx(1000.0)}
    assert led.idle_j == pytest.approx(1000.0)  # the last second; the baseline had no sample
    assert not a.present and not b.present
    assert a.sampled_s == pytest.approx(2.0) and b.sampled_s == pytest.approx(2.0)
    assert a.occupancy_s == pytest.approx(1.5) and b.occupancy_s == pytest.approx(1.5)
    assert a.memory_bytes == 0


def test_a_pid_the_driver_does_not_list_is_never_charged(fake_nvml: ModuleType) -> None:
    # given utilisation samples for PID 99, which the process lists do not have
    g = fake_nvml.GPUS[0]
    g.procs = {1: GIB, 2: GIB}
    g.sm = {1: 30, 2: 10, 99: 100}
    resolver = MapResolver({1: "a", 2: "b", 99: "intruder"})
    backend = NvmlBackend(nvml=fake_nvml)
    sampler = Sampler(backend, backend.open(), resolver, SamplerSettings(hostname="n", energy_interval_s=0.0))
    sampler.tick()
    g.energy_mj += 400_000
    sampler.tick()
    led = sampler.gpus[0]
    # then only listed PIDs are resolved and charged, and the split is among them
    assert 99 not in resolver.calls
    assert set(led.jobs) == {"a", "b"}
    assert led.jobs["a"].energy_j["sm_time"] == pytest.approx(300.0)
    assert led.jobs["b"].energy_j["sm_time"] == pytest.approx(100.0)


def test_unsupported_energy_counter_falls_back_to_power(fake_nvml: ModuleType) -> None:
    g = fake_nvml.GPUS[0]
    g.energy_supported = False
    g.power_mw = 250_000
    backend = NvmlBackend(nvml=fake_nvml)
    info = backend.open()
    assert not info.gpus[0].energy_counter
    assert backend.read(read_energy=True).gpus[0].energy_mj is None
    assert backend.read(read_energy=True).gpus[0].power_w == 250.0


def test_power_limit_and_sm_clock_are_exported_where_the_driver_says(fake_nvml: ModuleType) -> None:
    # given two GPUs: one whose driver reports its enforced limit and SM clock, one that supports neither
    fake_nvml.reset(2)
    fake_nvml.GPUS[0].power_limit_mw, fake_nvml.GPUS[0].sm_clock_mhz = 500_000, 1755
    fake_nvml.GPUS[1].power_limit_mw = fake_nvml.GPUS[1].sm_clock_mhz = None
    sampler, _ = sampler_on(fake_nvml, {})
    # when
    sampler.tick()
    sampler.tick()
    text = generate_latest(make_registry(sampler.snapshot, process_metrics=False)).decode()
    # then the first GPU's are in W and Hz; the second has no series at all (unknown, never 0)
    gpu0 = 'gpu="0",hostname="n",uuid="GPU-fake-0000"'
    assert f"fleetwatt_gpu_power_limit_watts{{{gpu0}}} 500.0" in text
    assert f"fleetwatt_gpu_sm_clock_hertz{{{gpu0}}} 1.755e+09" in text
    assert 'fleetwatt_gpu_power_limit_watts{gpu="1"' not in text
    assert 'fleetwatt_gpu_sm_clock_hertz{gpu="1"' not in text


def test_a_lost_gpu_is_skipped_not_fatal(fake_nvml: ModuleType) -> None:
    fake_nvml.reset(2)
    backend = NvmlBackend(nvml=fake_nvml)
    backend.open()
    fake_nvml.GPUS[1].lost = True
    reading = backend.read(read_energy=True)
    assert [g.index for g in reading.gpus] == [0]
    fake_nvml.GPUS[1].lost = False
    assert [g.index for g in backend.read(read_energy=True).gpus] == [0, 1]


def test_the_backend_only_reads(fake_nvml: ModuleType) -> None:
    # given a module that records every call
    g = fake_nvml.GPUS[0]
    g.procs, g.sm, g.accounting = {1: GIB, 2: GIB}, {1: 50}, True
    proxy = RecordingModule(fake_nvml)
    sampler, backend = sampler_on(proxy, {1: "a", 2: "b"})
    for _ in range(3):
        sampler.tick()
    backend.close()
    # then nothing but getters, init and shutdown was touched: no GPU setting can have changed
    calls = {n for n in proxy.used if n.startswith("nvml") and n[4].isupper()}
    assert calls, "the proxy saw no calls"
    allowed = ("nvmlInit", "nvmlShutdown", "nvmlSystemGet", "nvmlDeviceGet")
    assert {n for n in calls if not n.startswith(allowed)} == set()


def test_named_errors_for_nvml_codes() -> None:
    assert isinstance(errors.nvml_error(6), errors.NvmlNotFound)
    assert isinstance(errors.nvml_error(3), errors.NvmlNotSupported)
    assert isinstance(errors.nvml_error(12), errors.NvmlLibraryNotFound)
    assert isinstance(errors.nvml_error(15), errors.NvmlGpuLost)
    assert type(errors.nvml_error(42)) is errors.NvmlError and errors.nvml_error(42).code == 42


def test_init_failure_is_backend_unavailable(fake_nvml: ModuleType) -> None:
    fake_nvml.INIT_ERROR = fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(errors.BackendUnavailable, match="driver is not loaded"):
        NvmlBackend(nvml=fake_nvml).open()


def test_command_line_without_a_driver_exits_with_one_clear_line(tmp_path: Any) -> None:
    # given this machine, which has no NVIDIA driver (the real nvidia-ml-py cannot load libnvidia-ml)
    env = {**os.environ, "PYTHONPATH": str(AGENT_SRC), "LD_LIBRARY_PATH": str(tmp_path)}
    # when
    proc = subprocess.run(
        [sys.executable, "-m", "fleetwatt_agent", "--backend", "nvml", "--listen", "127.0.0.1:0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # then
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fleetwatt-agent: NVML backend unavailable")
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_accounting_mode_counts_a_process_that_ended_since_the_last_tick(fake_nvml: ModuleType) -> None:
    # given accounting mode on (an admin's setting) and a process that ran until just now
    g = fake_nvml.GPUS[0]
    g.accounting = True
    g.procs, g.sm = {1: GIB}, {1: 60}
    backend = NvmlBackend(nvml=fake_nvml)
    info = backend.open()
    assert info.accounting_mode == "enabled"
    backend.read(read_energy=False)
    now_us = int(time.time() * 1e6)
    g.finished = {
        2: fake_nvml.AccountingStats(40, 5, 3 * GIB, 2000, now_us - 1_000_000, 0),  # ended a moment ago
        3: fake_nvml.AccountingStats(40, 5, 3 * GIB, 1000, now_us - 3_600_000_000, 0),  # ended an hour ago
    }
    g.sm = {1: 60, 2: 30}
    # when
    reading = backend.read(read_energy=False).gpus[0]
    # then the process that ended during the sample is present, with its samples; the old one is not
    assert [(p.pid, p.memory_bytes, p.activity_pct) for p in reading.processes] == [(1, GIB, 60.0), (2, 3 * GIB, 30.0)]


def test_mig_lists_every_instance_and_splits_by_memory(fake_nvml: ModuleType) -> None:
    g = fake_nvml.GPUS[0]
    g.mig = True
    g.mig_procs = {0: {1: 10 * GIB}, 3: {2: 30 * GIB}}
    sampler, backend = sampler_on(fake_nvml, {1: "a", 2: "b"})
    assert backend.open is not None
    assert sampler.info.process_utilization == "mig" and sampler.info.gpus[0].mig
    sampler.tick()
    g.energy_mj += 400_000
    sampler.tick()
    jobs = sampler.gpus[0].jobs
    assert jobs["a"].energy_j == {"memory": pytest.approx(100.0)}
    assert jobs["b"].energy_j == {"memory": pytest.approx(300.0)}


def test_mean_activity_reads_only_samples_after_the_last_one_seen() -> None:
    samples = (
        (11, 100, 90.0, 10.0),  # before `since`: a driver may hand it back again
        (11, 200, 80.0, 20.0),
        (12, 200, 20.0, 5.0),
        (11, 300, 60.0, 40.0),
        (0, 350, 99.0, 99.0),  # an empty slot
    )
    activity, newest = mean_activity(samples, since_us=150)
    assert activity == {11: (70.0, 30.0), 12: (20.0, 5.0)}
    assert newest == 300
    assert mean_activity((), since_us=150) == ({}, 150)
