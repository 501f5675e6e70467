"""HTTP: /metrics (Prometheus text or OpenMetrics, negotiated), /jobs (JSON), /healthz."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from fleetwatt_agent import __version__
from fleetwatt_agent.ledger import GpuLedger, JobGpuLedger
from fleetwatt_agent.model import JobInfo
from fleetwatt_agent.sampler import Snapshot

log = logging.getLogger(__name__)


def job_gpu_coverage(job: JobGpuLedger, info: JobInfo | None, agent_start: float | None) -> float:
    """Sampled seconds over expected seconds on one GPU, at most 1.

    Expected runs to the last sample the job was in, from: the job's start when the job began before
    the agent was watching (its earlier time on the GPU went unseen), else the start of the first sample
    the job was in (the agent was watching when it arrived, so nothing before that was missed)."""
    ref = job.first_sample_start if job.first_sample_start is not None else job.first_seen
    if info is not None and info.start_time is not None and agent_start is not None:
        if info.start_time < agent_start:
            ref = info.start_time
    expected = job.last_seen - ref
    if expected <= 0.0:
        return 1.0 if job.sampled_s > 0 else 0.0
    return min(job.sampled_s / expected, 1.0)


def _dominant(by_method: dict[str, float]) -> str:
    return max(by_method, key=lambda m: by_method[m]) if by_method else ""


def _gpu_json(led: GpuLedger) -> dict[str, Any]:
    return {
        "gpu": str(led.info.index),
        "uuid": led.info.uuid,
        "name": led.info.name,
        "energy_j": led.energy_j,
        "pending_energy_j": sum(v[0] for v in led.window.values()) if led.window else None,
        "idle_energy_j": led.idle_j,
        "power_w": led.power_w,
        "memory_used_bytes": led.memory_used_bytes,
        "sampled_s": led.sampled_s,
        "samples": led.samples,
        "energy_counter": led.info.energy_counter,
        "energy_counter_resets": led.resets,
        "mig": led.info.mig,
        "invariant_max_residual_j": led.max_residual_j,
        "jobs_present": sorted(k for k, j in led.jobs.items() if j.present),
    }


def jobs_document(snap: Snapshot) -> dict[str, Any]:
    """The /jobs JSON: each job on the node now (or lingering), per GPU: energy so far (committed plus
    the open window's provisional part), attribution and joules per method, sampled seconds, coverage,
    memory held, start time."""
    per_job: dict[str, list[dict[str, Any]]] = {}
    for led in snap.gpus:
        for key, job in led.jobs.items():
            by_method = {
                m: job.energy_j.get(m, 0.0) + job.pending_j.get(m, 0.0) for m in set(job.energy_j) | set(job.pending_j)
            }
            per_job.setdefault(key, []).append(
                {
                    "gpu": str(led.info.index),
                    "uuid": led.info.uuid,
                    "energy_j": sum(by_method.values()),
                    "committed_energy_j": sum(job.energy_j.values()),
                    "attribution": _dominant(by_method),
                    "energy_by_method_j": by_method,
                    "sampled_s": job.sampled_s,
                    "occupancy_s": job.occupancy_s,
                    "sm_s": job.sm_s,
                    "coverage": job_gpu_coverage(job, snap.jobs.get(key), snap.first_tick_wall),
                    "memory_bytes": job.memory_bytes,
                    "first_seen": job.first_seen,
                    "last_seen": job.last_seen,
                    "present": job.present,
                }
            )
    jobs = []
    for key in sorted(per_job):
        gpus = per_job[key]
        info = snap.jobs.get(key) or JobInfo(job_key=key)
        job_methods: dict[str, float] = {}
        for g in gpus:
            for m, j in g["energy_by_method_j"].items():
                job_methods[m] = job_methods.get(m, 0.0) + j
        sampled = sum(g["sampled_s"] for g in gpus)
        expected = sum(g["sampled_s"] / g["coverage"] for g in gpus if g["coverage"] > 0)
        jobs.append(
            {
                **info.to_json(),
                "present": any(g["present"] for g in gpus),
                "energy_j": sum(job_methods.values()),
                "attribution": _dominant(job_methods),
                "energy_by_method_j": job_methods,
                "sampled_s": sampled,
                "occupancy_s": sum(g["occupancy_s"] for g in gpus),
                "coverage": min(sampled / expected, 1.0) if expected > 0 else 0.0,
                "memory_bytes": sum(g["memory_bytes"] for g in gpus),
                "gpus": gpus,
            }
        )
    return {
        "hostname": snap.hostname,
        "agent_version": __version__,
        "backend": snap.info.backend,
        "driver": snap.info.driver,
        "process_utilization": snap.info.process_utilization,
        "accounting_mode": snap.info.accounting_mode,
        "time": snap.last_tick_wall,
        "samples_total": snap.samples_total,
        "missed_samples_total": snap.missed_total,
        "tick_cpu_seconds_total": snap.tick_cpu_s,
        "gpus": [_gpu_json(led) for led in snap.gpus],
        "jobs": jobs,
    }


def health(snap: Snapshot) -> tuple[int, dict[str, Any]]:
    """200 once the agent has ticked and keeps ticking (or has played its whole replay)."""
    body: dict[str, Any] = {
        "backend": snap.info.backend,
        "samples_total": snap.samples_total,
        "errors_total": snap.errors_total,
        "tick_cpu_seconds_total": snap.tick_cpu_s,
        "replay_done": snap.done and snap.info.backend == "replay",
        "done": snap.done,
    }
    if snap.samples_total == 0 or snap.last_tick_real is None:
        return 503, {**body, "status": "starting"}
    age = time.monotonic() - snap.last_tick_real
    body["last_tick_age_s"] = round(age, 3)
    if not snap.done and age > max(5 * snap.interval_s, 10.0):
        return 503, {**body, "status": "stalled"}
    if snap.done and snap.info.backend != "replay":
        return 503, {**body, "status": "stopped"}
    return 200, {**body, "status": "ok"}


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry, snapshot: Callable[[], Snapshot]) -> None:
        self.registry = registry
        self.snapshot = snapshot
        super().__init__(address, _Handler)

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="fleetwatt-http", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: AgentHTTPServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._send(200, encoder(self.server.registry), content_type)
        elif path == "/jobs":
            body = json.dumps(jobs_document(self.server.snapshot()), indent=1).encode()
            self._send(200, body, "application/json")
        elif path == "/healthz":
            status, doc = health(self.server.snapshot())
            self._send(status, json.dumps(doc).encode(), "application/json")
        elif path == "/":
            self._send(200, b"fleetwatt-agent: /metrics /jobs /healthz\n", "text/plain; charset=utf-8")
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        log.debug("http: " + format, *args)
