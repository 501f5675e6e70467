"""Helpers for the HTTP tests: an in-process server on a ticked sampler, the real command, plain requests."""

from __future__ import annotations

import http.client
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from fleetwatt_agent.auth import TokenFile
from fleetwatt_agent.collector import make_registry
from fleetwatt_agent.model import JobInfo
from fleetwatt_agent.sampler import Sampler
from fleetwatt_agent.server import AgentHTTPServer, HttpSettings
from prometheus_client.registry import CollectorRegistry

from .conftest import AGENT_SRC
from .testkit import gpu, make_sampler, run_all, tick, write_trace

TOKEN = "fw-test-token-8c1d6a0e5b7f4a92"


def ticked_sampler() -> Sampler:
    sampler, _ = make_sampler(
        [tick(i, [gpu(0, energy_mj=100_000 * i, procs=[(11, 2**30, 60.0), (12, 2**29, 20.0)])]) for i in range(6)],
        jobs={11: "slurm/4242", 12: "slurm/4243"},
    )
    run_all(sampler)
    return sampler


@contextmanager
def serving(
    settings: HttpSettings | None = None,
    token: TokenFile | None = None,
    host: str = "127.0.0.1",
    registry: CollectorRegistry | None = None,
) -> Iterator[AgentHTTPServer]:
    """An AgentHTTPServer in this process (so that the tests can count its threads), on a free port."""
    sampler = ticked_sampler()
    server = AgentHTTPServer(
        (host, 0),
        registry if registry is not None else make_registry(sampler.snapshot),
        sampler.snapshot,
        settings,
        token,
    )
    thread = server.serve_in_thread()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def request(
    port: int, path: str, headers: dict[str, str] | None = None, host: str = "127.0.0.1", timeout: float = 10.0
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} file descriptors, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (a connection to it comes from it)."""
    for probe in ("192.0.2.1", "10.255.255.255", "198.51.100.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((probe, 9))  # UDP: nothing is sent, the kernel only picks a source address
            except OSError:
                continue
            address = str(s.getsockname()[0])
            if not address.startswith("127.") and address != "0.0.0.0":
                return address
    return None


def listen_backlog(port: int) -> int | None:
    """The listen queue length of the socket listening on `port`, as `ss` shows it (Send-Q), or None."""
    if shutil.which("ss") is None:
        return None
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False).stdout
    fields = out.split()
    return int(fields[2]) if len(fields) >= 3 and fields[0] == "LISTEN" else None


def small_trace(path: Path) -> Path:
    ticks = [tick(i, [gpu(0, energy_mj=100_000 * i, procs=[(11, 2**30, 50.0)])]) for i in range(6)]
    return write_trace(path, ticks, {11: JobInfo("slurm/7", "slurm", "7", "ada", "physics", name="train")})


def agent_command(trace: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fleetwatt_agent",
        "--backend",
        "replay",
        "--replay",
        str(trace),
        "--replay-speed",
        "0",
        *args,
    ]


def agent_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATT_AGENT_")}
    return {**env, "PYTHONPATH": str(AGENT_SRC), **extra}


@contextmanager
def running_agent(trace: Path, args: Sequence[str], env: dict[str, str] | None = None) -> Iterator[int]:
    """The real command, serving until the block ends; yields its port once /healthz answers."""
    proc = subprocess.Popen(
        agent_command(trace, *args),
        env=env or agent_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on http://[^\s]*:(\d+)", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        port = int(match.group(1))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                status, _, body = request(port, "/healthz", timeout=2)
                if status == 200 and json.loads(body)["replay_done"]:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            pytest.fail("the agent never finished its replay")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
