"""Replay a recorded trace (recorder.py), so CI and the app's tests run the real agent without a GPU.

Times are shifted so that the first tick is "now" (Prometheus scraping a live replay sees current
samples); --replay-keep-time keeps the recorded times. --replay-speed 1 plays in real time, N plays
N times faster, 0 as fast as the agent can.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fleetwatt_agent.errors import BackendUnavailable, ReplayFinished, TraceFormatError
from fleetwatt_agent.model import (
    BackendInfo,
    GpuInfo,
    GpuReading,
    JobInfo,
    ProcessReading,
    TickReading,
)
from fleetwatt_agent.recorder import FORMAT


class ReplayResolver:
    def __init__(self) -> None:
        self.jobs: dict[int, JobInfo] = {}

    def resolve(self, pid: int) -> JobInfo:
        info = self.jobs.get(pid)
        return JobInfo(**info.__dict__) if info else JobInfo(job_key=f"proc/{pid}-0", scheduler="process")


class ReplayBackend:
    name = "replay"
    self_paced = True

    def __init__(self, path: str | Path, *, speed: float = 1.0, keep_time: bool = False) -> None:
        self.path = Path(path)
        self.speed = speed
        self.keep_time = keep_time
        self.header: dict[str, Any] = {}
        self._resolver = ReplayResolver()
        self._lines: Iterator[str] = iter(())
        self._file: Any = None
        self._offset = 0.0
        self._first_mono: float | None = None
        self._started_mono = 0.0
        self._pending: dict[str, Any] | None = None
        self.ticks = 0

    def open(self) -> BackendInfo:
        try:
            self._file = open(self.path, encoding="utf-8")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise BackendUnavailable(f"replay backend unavailable: {exc}") from None
        self._lines = (line for line in self._file if line.strip())
        try:
            self.header = json.loads(next(self._lines))
        except (StopIteration, json.JSONDecodeError):
            raise BackendUnavailable(f"replay backend unavailable: {self.path} is not a trace") from None
        if self.header.get("format") != FORMAT:
            raise BackendUnavailable(f"replay backend unavailable: {self.path} is not a {FORMAT} file")
        self._pending = self._next_record()
        if self._pending is not None and not self.keep_time:
            self._offset = time.time() - float(self._pending["t"])
        self._started_mono = time.monotonic()
        gpus = tuple(
            GpuInfo(
                index=int(g["index"]),
                uuid=str(g["uuid"]),
                name=str(g.get("name", "")),
                energy_counter=bool(g.get("energy_counter", True)),
                mig=bool(g.get("mig", False)),
            )
            for g in self.header.get("gpus", [])
        )
        return BackendInfo(
            backend=self.name,
            gpus=gpus,
            driver=str(self.header.get("driver", "")),
            process_utilization=str(self.header.get("process_utilization", "unsupported")),
            accounting_mode=str(self.header.get("accounting_mode", "unsupported")),
            extra={"recorded_backend": str(self.header.get("backend", ""))},
        )

    def _next_record(self) -> dict[str, Any] | None:
        try:
            line = next(self._lines)
        except StopIteration:
            return None
        try:
            rec: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{self.path}: {exc}") from None
        return rec

    def resolver(self) -> ReplayResolver:
        return self._resolver

    def read(self, *, read_energy: bool = True) -> TickReading:
        rec = self._pending
        if rec is None:
            raise ReplayFinished(str(self.path))
        self._pending = self._next_record()
        mono = float(rec["mono"])
        if self._first_mono is None:
            self._first_mono = mono
        if self.speed > 0:
            due = self._started_mono + (mono - self._first_mono) / self.speed
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        for pid, info in rec.get("jobs", {}).items():
            job = JobInfo.from_json(info)
            if job.start_time is not None:
                job.start_time += self._offset
            self._resolver.jobs[int(pid)] = job
        self.ticks += 1
        return TickReading(
            wall=float(rec["t"]) + self._offset,
            mono=mono,
            gpus=tuple(_gpu(g) for g in rec["gpus"]),
        )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _gpu(g: dict[str, Any]) -> GpuReading:
    energy = g.get("energy_mj")
    power = g.get("power_w")
    util = g.get("util") or {}
    return GpuReading(
        index=int(g["index"]),
        power_w=float(power) if power is not None else None,
        memory_used_bytes=int(g.get("memory_used_bytes", 0)),
        processes=tuple(_process(p) for p in g.get("processes", [])),
        energy_mj=int(energy) if energy is not None else None,
        signal=g.get("signal"),
        activity_missing=bool(g.get("activity_missing", False)),
        util_samples=tuple((int(x[0]), int(x[1]), float(x[2]), float(x[3])) for x in util.get("samples", [])),
        util_since_us=int(util["since_us"]) if "since_us" in util else None,
        power_limit_w=_optional_float(g.get("power_limit_w")),
        sm_clock_mhz=_optional_float(g.get("sm_clock_mhz")),
    )


def _optional_float(value: Any) -> float | None:
    """A reading a trace may lack (recorded before it was read): None, not 0."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _process(p: list[Any]) -> ProcessReading:
    """[pid, memory_bytes, activity_pct, mem_activity_pct (, gpu_busy_ns (, {kernel: ns} (, raw ns
    (, estimated ns))))]; version 1
    traces stop at activity_pct; the GPU-time counters are there only for processes that keep them."""
    sm = p[2] if len(p) > 2 else None
    mem = p[3] if len(p) > 3 else None
    busy = p[4] if len(p) > 4 else None
    if busy is not None and not _count(busy):
        raise TraceFormatError(f"a process's GPU-time counter must be a non-negative integer, got {busy!r}")
    kernels = p[5] if len(p) > 5 else None
    if kernels is not None and (
        not isinstance(kernels, dict) or not all(isinstance(k, str) and _count(v) for k, v in kernels.items())
    ):
        raise TraceFormatError(f"a process's kernel counters must map ids to non-negative integers, got {kernels!r}")
    raw = p[6] if len(p) > 6 else None
    if raw is not None and not _count(raw):
        raise TraceFormatError(f"a process's raw GPU-time counter must be a non-negative integer, got {raw!r}")
    estimated = p[7] if len(p) > 7 else None
    if estimated is not None and not _count(estimated):
        raise TraceFormatError(f"a process's estimated GPU-time counter must be a count of ns, got {estimated!r}")
    return ProcessReading(
        int(p[0]),
        int(p[1]),
        float(sm) if sm is not None else None,
        float(mem) if mem is not None else None,
        gpu_busy_ns=busy,
        gpu_kernels_ns=tuple(kernels.items()) if kernels else None,
        gpu_busy_raw_ns=raw if raw is not None else busy,
        gpu_busy_estimated_ns=(estimated or 0) if busy is not None else None,
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_trace(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, tick records) of a trace: for tests and tools."""
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("format") != FORMAT:
        raise TraceFormatError(f"{path} is not a {FORMAT} file")
    return lines[0], lines[1:]
