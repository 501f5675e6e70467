"""HTTP: /metrics (Prometheus text or OpenMetrics, negotiated), /jobs (JSON), /healthz.

Who may read what is in auth.py; how connections are taken (a selector thread, a bounded pool, a read
timeout, a listen backlog for many scrapers) is AgentHTTPServer's docstring."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import math
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from fleetwatt_agent import __version__
from fleetwatt_agent.auth import TokenFile, bearer_matches, is_loopback
from fleetwatt_agent.ledger import GpuLedger, JobGpuLedger
from fleetwatt_agent.model import JobInfo
from fleetwatt_agent.power_model import PowerStats, power_fit
from fleetwatt_agent.sampler import Snapshot

log = logging.getLogger(__name__)


def job_gpu_coverage(job: JobGpuLedger, info: JobInfo | None, agent_start: float | None) -> float:
    """Sampled seconds over expected seconds on one GPU, at most 1.

    Expected runs to the last sample the job was in, from: the job's start when the job began before
    the agent was watching (its earlier time on the GPU went unseen), else the start of the first sample
    the job was in (the agent was watching when it arrived, so nothing before that was missed)."""
    ref = job.first_sample_start if job.first_sample_start is not None else job.first_seen
    if info is not None and info.start_time is not None and agent_start is not None and info.start_time < agent_start:
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


def power_model_json(name: str, stats: PowerStats) -> dict[str, Any]:
    """One GPU model's power model: its fit so far (null before 3 samples), whether it is calibrated and,
    if not, why ("samples", "sm_spread", "mem_spread", "correlated", "no_rise")."""
    fit = power_fit(stats)
    return {
        "gpu_model": name,
        "samples": stats.n,
        "calibrated": fit is not None and fit.calibrated,
        "not_calibrated_because": "samples" if fit is None else fit.reason,
        "p0_w": fit.p0_w if fit else None,
        "sm_w_per_pct": fit.sm_w_per_pct if fit else None,
        "mem_w_per_pct": fit.mem_w_per_pct if fit else None,
        "rms_residual_w": fit.rms_w if fit else None,
    }


def jobs_document(snap: Snapshot) -> dict[str, Any]:
    """The /jobs JSON: each job on the node now (or lingering), per GPU: energy so far (committed plus
    the open window's provisional part), attribution and joules per method, sampled seconds, coverage,
    memory held, start time, and the job's own power as the sm_mem split knows it."""
    per_job: dict[str, list[dict[str, Any]]] = {}
    fits = {name: power_fit(stats) for name, stats in snap.power_models.items()}  # one per GPU model, not per GPU
    for led in snap.gpus:
        fit = fits.get(led.info.name)
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
                    # sm_mem: the job's own power, from its samples alone on this GPU (null until enough)
                    "alone_samples": int(job.solo.n),
                    "own_power_w_per_sm_pct": job.solo.dynamic_w_per_sm_pct(fit.p0_w) if fit else None,
                    # exact GPU time (the opt-in library): seconds of it, and samples that had it; null
                    # for a job that never reported it
                    "gpu_time_s": job.gpu_time_s if job.gpu_time_samples else None,
                    "gpu_time_samples": job.gpu_time_samples,
                    # of gpu_time_s, the seconds counted from the library's windows (a launch-bound job
                    # traced in windows), not traced kernel by kernel; 0 where every kernel was
                    "gpu_time_estimated_s": job.gpu_time_estimated_s if job.gpu_time_samples else None,
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
        "split": snap.split,
        "power_models": [power_model_json(name, stats) for name, stats in sorted(snap.power_models.items())],
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


@dataclass(frozen=True)
class HttpSettings:
    """How the HTTP side takes connections (flags --http-workers, --http-timeout-s, --http-backlog)."""

    workers: int = 8  # requests answered at once
    timeout_s: float = 5.0  # a connection must deliver a whole request head within this, else it is closed
    backlog: int = 128  # the listen queue: connections the kernel holds until they are accepted
    max_head_bytes: int = 16384  # a longer request head is refused (431)


# The client went away (or stopped reading) before its answer was written: one debug line, no traceback.
_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)
_PROTECTED = ("/metrics", "/jobs")
_WAKE = object()
_FD_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def _head_end(buffer: bytes | bytearray) -> int:
    """The index just past the blank line that ends a request head, or -1 while it is incomplete."""
    ends = [i + n for i, n in ((buffer.find(b"\r\n\r\n"), 4), (buffer.find(b"\n\n"), 2)) if i >= 0]
    return min(ends) if ends else -1


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


class _Connection:
    __slots__ = ("buffer", "deadline", "name", "peer", "sock")

    def __init__(self, sock: socket.socket, peer: tuple[Any, ...]) -> None:
        self.sock = sock
        self.peer = (str(peer[0]), int(peer[1]))
        self.name = f"{peer[0]}:{peer[1]}"
        self.buffer = bytearray()
        self.deadline = 0.0


class AgentHTTPServer:
    """/metrics, /jobs and /healthz over HTTP/1.1.

    One thread (serve_forever) waits on every open connection with a selector until the connection has
    sent a whole request head; only then does one of `workers` pool threads answer it. A connection that
    sends nothing, or part of a request, holds a socket but no thread, and is closed `timeout_s` after it
    opened (or after its previous answer, when kept alive). The listen backlog is `backlog`, so a burst of
    scrapers connecting at once is queued by the kernel, not dropped into SYN retries."""

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        snapshot: Callable[[], Snapshot],
        settings: HttpSettings | None = None,
        token: TokenFile | None = None,
    ) -> None:
        self.registry = registry
        self.snapshot = snapshot
        self.settings = settings or HttpSettings()
        self.token = token
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=self.settings.backlog)
        self.socket.setblocking(False)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self.server_port: int = self.server_address[1]
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._pool = ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="fleetwatt-http")
        self._waiting: set[_Connection] = set()  # in the selector, waiting for a request head
        self._deadlines: deque[tuple[float, _Connection]] = deque()  # in deadline order; stale entries skipped
        self._returned: deque[_Connection] = deque()  # answered and kept alive, handed back by workers
        self._busy: set[_Connection] = set()  # with the pool
        self._busy_lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._closed = False
        self._fd_warned = -math.inf

    # -- the loop -------------------------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        sel = self._selector
        sel.register(self.socket, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(self._select_timeout(poll_interval)):
                    try:
                        if key.data is None:
                            self._accept()
                        elif key.data is _WAKE:
                            self._drain_wake()
                        else:
                            self._receive(key.data)
                    except Exception:  # a bug with one connection must not stop the others being served
                        log.exception("http: error in the connection loop")
                        if isinstance(key.data, _Connection):
                            self._drop(key.data)
                self._take_back()
                self._expire(time.monotonic())
        finally:
            sel.unregister(self.socket)
            sel.unregister(self._wake_r)
            for conn in list(self._waiting):
                self._drop(conn)
            self._deadlines.clear()
            self._stopped.set()

    def serve_in_thread(self) -> threading.Thread:
        self._stopped.clear()  # so that a shutdown() right after this waits for the loop to start and end
        thread = threading.Thread(target=self.serve_forever, name="fleetwatt-http", daemon=True)
        thread.start()
        return thread

    def shutdown(self) -> None:
        """Stop serve_forever and wait for it to return."""
        self._stop.set()
        self._wake()
        self._stopped.wait()

    def server_close(self) -> None:
        if self._closed:
            return
        self.shutdown()
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._busy_lock:
            leftovers = list(self._busy)
            self._busy.clear()
        for conn in leftovers + list(self._returned):
            _close(conn.sock)
        self._returned.clear()
        self.socket.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _select_timeout(self, poll_interval: float) -> float:
        if not self._deadlines:
            return poll_interval
        return min(poll_interval, max(0.0, self._deadlines[0][0] - time.monotonic()))

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
            self._wake_w.send(b"\0")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _accept(self) -> None:
        for _ in range(128):  # then let the loop read what the accepted connections sent
            try:
                sock, peer = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno not in _FD_ERRNOS:
                    log.debug("http: accept failed: %s", exc)
                    return
                # Out of file descriptors: make room by closing the connection that has waited longest.
                now = time.monotonic()
                if now - self._fd_warned > 60.0:
                    self._fd_warned = now
                    log.warning("http: out of file descriptors (%s); closing the oldest idle connections", exc)
                if not self._evict_oldest():
                    self._stop.wait(0.05)  # every descriptor is with a worker: they are done within moments
                    return
                continue
            sock.setblocking(False)
            self._wait(_Connection(sock, peer), time.monotonic())

    def _receive(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("http: %s went away (%s)", conn.name, exc.__class__.__name__)
            self._drop(conn)
            return
        if not data:  # the client closed its side
            self._drop(conn)
            return
        conn.buffer += data
        end = _head_end(conn.buffer)
        if end > self.settings.max_head_bytes or (end < 0 and len(conn.buffer) > self.settings.max_head_bytes):
            log.debug("http: %s sent a request head over %d bytes; closed", conn.name, self.settings.max_head_bytes)
            with contextlib.suppress(OSError):
                conn.sock.send(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
            self._drop(conn)
        elif end >= 0:
            self._dispatch(conn)

    def _wait(self, conn: _Connection, now: float) -> None:
        conn.deadline = now + self.settings.timeout_s
        self._waiting.add(conn)
        self._selector.register(conn.sock, selectors.EVENT_READ, conn)
        self._deadlines.append((conn.deadline, conn))

    def _unwait(self, conn: _Connection) -> None:
        if conn in self._waiting:
            self._waiting.discard(conn)
            self._selector.unregister(conn.sock)

    def _drop(self, conn: _Connection) -> None:
        self._unwait(conn)
        _close(conn.sock)

    def _expire(self, now: float) -> None:
        while self._deadlines:
            deadline, conn = self._deadlines[0]
            current = conn in self._waiting and conn.deadline == deadline
            if current and deadline > now:
                return
            self._deadlines.popleft()
            if current:
                log.debug("http: %s sent no complete request within %g s; closed", conn.name, self.settings.timeout_s)
                self._drop(conn)

    def _evict_oldest(self) -> bool:
        while self._deadlines:
            deadline, conn = self._deadlines.popleft()
            if conn in self._waiting and conn.deadline == deadline:
                log.debug("http: closed %s, the oldest idle connection, to accept a new one", conn.name)
                self._drop(conn)
                return True
        return False

    def _dispatch(self, conn: _Connection) -> None:
        self._unwait(conn)
        with self._busy_lock:
            self._busy.add(conn)
        try:
            self._pool.submit(self._serve, conn)
        except RuntimeError:  # the pool is shut down: the server is closing
            with self._busy_lock:
                self._busy.discard(conn)
            _close(conn.sock)

    def _take_back(self) -> None:
        now = time.monotonic()
        while self._returned:
            conn = self._returned.popleft()
            conn.sock.setblocking(False)
            if _head_end(conn.buffer) >= 0:  # a pipelined request is already here
                self._dispatch(conn)
            else:
                self._wait(conn, now)

    # -- the workers ----------------------------------------------------------------------------------

    def _serve(self, conn: _Connection) -> None:
        keep = False
        try:
            keep = self._answer(conn)
        except _DISCONNECTS as exc:
            log.debug("http: %s went away before its answer was written (%s)", conn.name, exc.__class__.__name__)
        except Exception:
            log.exception("http: error while answering %s", conn.name)
        finally:
            with self._busy_lock:
                self._busy.discard(conn)
        if keep and not self._stop.is_set():
            self._returned.append(conn)
            self._wake()
        else:
            _close(conn.sock)

    def _answer(self, conn: _Connection) -> bool:
        """Answer the request whose head is at the start of the buffer; True to keep the connection."""
        end = _head_end(conn.buffer)
        head = bytes(conn.buffer[:end])
        del conn.buffer[:end]
        handler = _Handler(self, conn.peer, head)
        conn.sock.settimeout(self.settings.timeout_s)  # a client that does not read its answer is dropped
        conn.sock.sendall(handler.response())
        return not handler.close_connection


class _Handler(BaseHTTPRequestHandler):
    """Answers one request whose head the server has already read; the answer is built in memory and the
    server sends it in one write."""

    protocol_version = "HTTP/1.1"

    def __init__(self, agent: AgentHTTPServer, peer: tuple[str, int], head: bytes) -> None:
        # Not BaseRequestHandler.__init__: there is no socket to set up, the head is already in memory.
        self.agent = agent
        self.client_address = peer
        self.rfile = io.BytesIO(head)
        self._out = io.BytesIO()
        self.wfile = self._out
        self.close_connection = True
        self.handle_one_request()
        headers = getattr(self, "headers", None)
        if headers is not None and (
            headers.get("Transfer-Encoding") or headers.get("Content-Length", "0").strip() not in ("", "0")
        ):
            self.close_connection = True  # a body this agent never reads must not be parsed as a request

    def response(self) -> bytes:
        return self._out.getvalue()

    def do_GET(self) -> None:  # the stdlib's name
        path = self.path.split("?", 1)[0]
        if path in _PROTECTED and not self._allowed(path):
            return
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._send(200, encoder(self.agent.registry), content_type)
        elif path == "/jobs":
            body = json.dumps(jobs_document(self.agent.snapshot()), indent=1).encode()
            self._send(200, body, "application/json")
        elif path == "/healthz":
            status, doc = health(self.agent.snapshot())
            self._send(status, json.dumps(doc).encode(), "application/json")
        elif path == "/":
            self._send(200, b"fleetwatt-agent: /metrics /jobs /healthz\n", "text/plain; charset=utf-8")
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _allowed(self, path: str) -> bool:
        """With a token: /metrics and /jobs need it, from every peer. Without one: /jobs (user, account and
        job names) answers only to loopback peers."""
        token = self.agent.token
        if token is not None:
            if bearer_matches(self.headers.get("Authorization"), token.current()):
                return True
            body = b"unauthorized: send Authorization: Bearer <the agent's token>\n"
            self._send(401, body, "text/plain; charset=utf-8", {"WWW-Authenticate": 'Bearer realm="fleetwatt-agent"'})
            return False
        if path == "/jobs" and not is_loopback(str(self.client_address[0])):
            body = b"forbidden: /jobs answers only to loopback peers unless the agent has a token (--auth-token-file)\n"
            self._send(403, body, "text/plain; charset=utf-8")
            return False
        return True

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's names
        log.debug("http: " + format, *args)
