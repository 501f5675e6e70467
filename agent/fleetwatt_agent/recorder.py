"""--record FILE: a JSONL trace of what the backend read and what the agent made of it.

Line 1, the header: {"format": "fleetwatt-agent-trace", "version": 2, "backend", "driver",
"hostname", "agent_version", "process_utilization", "accounting_mode", "interval_s",
"energy_interval_s", "gpus": [{"index", "uuid", "name", "energy_counter", "mig"}]}.
Then one line per tick:
  {"t": Unix seconds, "mono": monotonic seconds,
   "gpus": [{"index", "power_w", "memory_used_bytes", "energy_mj" (null when not read this tick),
             "power_limit_w", "sm_clock_mhz" (null where the driver does not say),
             "signal" ("sm" | "busy" | null), "activity_missing",
             "processes": [[pid, memory_bytes, activity_pct or null, mem_activity_pct or null
                            (, gpu_busy_ns: the process's exact GPU time counter, where it keeps one
                             (, {kernel id: ns}: its busiest kernels' counters
                             (, the union of its work, where gpu_busy_ns shares what it claimed with others
                              (, of that union, the ns counted from the library's windows, not traced))))],
                            ...],
             "util": {"since_us", "samples": [[pid, driver µs, SM %, memory %], ...]} (NVML: the raw
             per-process samples the activity came from; absent when none were asked for)}],
   "jobs": {"<pid>": JobInfo for each PID resolved this tick},
   "split": [{"index", "dt_s", "sample_j", "idle_j", "jobs": {job_key: [method, joules]},
              "residual_j", "commit": {"total_j", "by", "reset", "idle_j"} (when the window closed),
              "gap": true (when the sample was too long to count)}]}
Version 1 traces have three fields per process (no memory activity); the replay reads both versions.
"util" was added within version 2 (readers that do not know it ignore it; the processes' activity is
what the agent computed from it), and so were a process's fifth field, its GPU-time counter, and sixth,
its kernels' (gputime.py; older readers ignore them, and a trace without them replays as before), and its
eighth, the part of its union counted from windows (absent: every kernel traced), and a
GPU's "power_limit_w" and "sm_clock_mhz" (a trace without them replays with both unknown).
The replay backend reads "t", "mono", "gpus" and "jobs"; "split" is what the agent computed, kept so
that a replay can be checked against the recording and the invariant checked on every sample.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

from fleetwatt_agent import __version__
from fleetwatt_agent.model import BackendInfo, GpuReading, JobInfo, ProcessReading, TickReading

FORMAT = "fleetwatt-agent-trace"
VERSION = 2


def header(info: BackendInfo, *, hostname: str, interval_s: float, energy_interval_s: float) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "backend": info.backend,
        "driver": info.driver,
        "hostname": hostname,
        "agent_version": __version__,
        "process_utilization": info.process_utilization,
        "accounting_mode": info.accounting_mode,
        "interval_s": interval_s,
        "energy_interval_s": energy_interval_s,
        "gpus": [
            {"index": g.index, "uuid": g.uuid, "name": g.name, "energy_counter": g.energy_counter, "mig": g.mig}
            for g in info.gpus
        ],
    }


def tick_record(reading: TickReading, new_jobs: dict[int, JobInfo], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "t": reading.wall,
        "mono": reading.mono,
        "gpus": [
            {
                "index": g.index,
                "power_w": g.power_w,
                "memory_used_bytes": g.memory_used_bytes,
                "energy_mj": g.energy_mj,
                "signal": g.signal,
                "activity_missing": g.activity_missing,
                "power_limit_w": g.power_limit_w,
                "sm_clock_mhz": g.sm_clock_mhz,
                "processes": [_process(p) for p in g.processes],
                **_util(g),
            }
            for g in reading.gpus
        ],
        "jobs": {str(pid): info.to_json() for pid, info in new_jobs.items()},
        "split": outputs,
    }


def _process(p: ProcessReading) -> list[Any]:
    row: list[Any] = [p.pid, p.memory_bytes, p.activity_pct, p.mem_activity_pct]
    if p.gpu_busy_ns is not None:
        estimated = bool(p.gpu_busy_estimated_ns)
        row.append(p.gpu_busy_ns)
        if p.gpu_kernels_ns or p.gpu_busy_raw_ns not in (None, p.gpu_busy_ns) or estimated:
            row.append(dict(p.gpu_kernels_ns or ()))
        if p.gpu_busy_raw_ns not in (None, p.gpu_busy_ns) or estimated:
            row.append(p.gpu_busy_raw_ns if p.gpu_busy_raw_ns is not None else p.gpu_busy_ns)
        if estimated:
            row.append(p.gpu_busy_estimated_ns)
    return row


def _util(g: GpuReading) -> dict[str, Any]:
    if g.util_since_us is None:
        return {}
    return {"util": {"since_us": g.util_since_us, "samples": [list(x) for x in g.util_samples]}}


class Recorder:
    """Appends one line per tick, flushed, so a trace survives a crash and can be read while written."""

    def __init__(self, path: str | Path, head: dict[str, Any]) -> None:
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._write(head)

    def _write(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(obj, separators=(",", ":")) + "\n")
            self._file.flush()

    def write_tick(self, reading: TickReading, new_jobs: dict[int, JobInfo], outputs: list[dict[str, Any]]) -> None:
        self._write(tick_record(reading, new_jobs, outputs))

    def close(self) -> None:
        with self._lock:
            self._file.close()
