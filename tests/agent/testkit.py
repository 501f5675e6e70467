"""Helpers for the agent's tests: a scripted backend, a trace builder, a fixed resolver."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwatt_agent.errors import ReplayFinished
from fleetwatt_agent.model import BackendInfo, GpuInfo, GpuReading, JobInfo, ProcessReading, TickReading
from fleetwatt_agent.power_model import PowerStats
from fleetwatt_agent.recorder import header, tick_record
from fleetwatt_agent.sampler import Sampler, SamplerSettings


def gpu_infos(n: int, energy_counter: bool = True) -> tuple[GpuInfo, ...]:
    return tuple(
        GpuInfo(index=i, uuid=f"GPU-test-{i}", name="Test GPU", energy_counter=energy_counter) for i in range(n)
    )


@dataclass
class ScriptedBackend:
    """Plays TickReadings from a list, one per read()."""

    ticks: list[TickReading]
    info: BackendInfo
    name: str = "scripted"
    self_paced: bool = True
    position: int = 0
    energy_requests: list[bool] = field(default_factory=list)

    def open(self) -> BackendInfo:
        return self.info

    def read(self, *, read_energy: bool) -> TickReading:
        self.energy_requests.append(read_energy)
        if self.position >= len(self.ticks):
            raise ReplayFinished("end of script")
        self.position += 1
        return self.ticks[self.position - 1]

    def resolver(self) -> None:
        return None

    def close(self) -> None:
        pass


class MapResolver:
    """pid -> job_key as given; unknown PIDs are plain processes."""

    def __init__(self, jobs: dict[int, str], starts: dict[int, float] | None = None) -> None:
        self.jobs = jobs
        self.starts = starts or {}
        self.calls: list[int] = []

    def resolve(self, pid: int) -> JobInfo:
        self.calls.append(pid)
        key = self.jobs.get(pid, f"proc/{pid}-0")
        return JobInfo(job_key=key, scheduler="test", job_id=str(pid), start_time=self.starts.get(pid))


def make_sampler(
    ticks: Sequence[TickReading],
    *,
    n_gpus: int = 1,
    jobs: dict[int, str] | None = None,
    energy_counter: bool = True,
    settings: SamplerSettings | None = None,
    starts: dict[int, float] | None = None,
    power_models: Mapping[str, PowerStats] | None = None,
) -> tuple[Sampler, ScriptedBackend]:
    info = BackendInfo(backend="scripted", gpus=gpu_infos(n_gpus, energy_counter), process_utilization="supported")
    backend = ScriptedBackend(list(ticks), info)
    sampler = Sampler(
        backend,
        info,
        MapResolver(jobs or {}, starts),
        settings or SamplerSettings(hostname="test-node", energy_interval_s=0.0),
        power_models=power_models,
    )
    return sampler, backend


def run_all(sampler: Sampler) -> None:
    while True:
        try:
            sampler.tick()
        except ReplayFinished:
            return


def tick(
    t: float,
    gpus: Iterable[GpuReading],
    *,
    wall0: float = 1_800_000_000.0,
) -> TickReading:
    return TickReading(wall=wall0 + t, mono=1000.0 + t, gpus=tuple(gpus))


def gpu(
    index: int = 0,
    *,
    power_w: float | None = 100.0,
    energy_mj: int | None = None,
    procs: Iterable[tuple[int, int, float | None] | tuple[int, int, float | None, float | None]] = (),
    signal: str | None = "sm",
    missing: bool = False,
    memory_used: int = 0,
) -> GpuReading:
    return GpuReading(
        index=index,
        power_w=power_w,
        memory_used_bytes=memory_used,
        processes=tuple(ProcessReading(*p) for p in procs),  # (pid, memory, SM % [, memory activity %])
        energy_mj=energy_mj,
        signal=signal,  # type: ignore[arg-type]
        activity_missing=missing,
    )


def write_trace(
    path: Path,
    ticks: Sequence[TickReading],
    jobs: dict[int, JobInfo],
    *,
    n_gpus: int = 1,
    energy_interval_s: float = 0.0,
) -> Path:
    """A trace in the recorder's format (without the agent's outputs): PIDs' jobs on their first tick."""
    info = BackendInfo(
        backend="synthetic",
        gpus=gpu_infos(n_gpus),
        driver="test",
        process_utilization="supported",
        accounting_mode="disabled",
    )
    seen: set[int] = set()
    with open(path, "w") as f:
        f.write(
            json.dumps(header(info, hostname="trace-host", interval_s=1.0, energy_interval_s=energy_interval_s)) + "\n"
        )
        for reading in ticks:
            new = {}
            for g in reading.gpus:
                for p in g.processes:
                    if p.pid not in seen and p.pid in jobs:
                        new[p.pid] = jobs[p.pid]
                        seen.add(p.pid)
            f.write(json.dumps(tick_record(reading, new, [])) + "\n")
    return path


def totals(sampler: Sampler, index: int = 0) -> dict[str, Any]:
    led = sampler.gpus[index]
    return {
        "gpu": led.energy_j,
        "idle": led.idle_j,
        "jobs": {k: dict(j.energy_j) for k, j in led.jobs.items()},
        "job_sum": sum(sum(j.energy_j.values()) for j in led.jobs.values()),
    }
