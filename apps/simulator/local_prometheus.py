"""A Prometheus of our own for the demo and the tests: Debian's `prometheus` and `promtool`, on a free
port, with its own config and data folder, loaded with simulated history through promtool."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


class LocalPrometheusError(RuntimeError):
    pass


PORT_TRIES = 3


# The test processes of one `make test` (pytest-xdist's gw0, gw1, ...) each take their ports from a range of their own,
# below Linux's ephemeral ports (32768 and up): two processes asking the kernel for a free port at once may both be
# given the same one, and the one whose server binds it second then finds the other's answering in its stead.
WORKER_PORTS = 2000
WORKER_PORTS_FROM = 20000


def free_port() -> int:
    """A port of 127.0.0.1 free now: the kernel's choice, or, in a test process of several, one of its own range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return _bound_port(0)
    first = WORKER_PORTS_FROM + (int(worker[2:]) % 6) * WORKER_PORTS
    for port in random.sample(range(first, first + WORKER_PORTS), WORKER_PORTS):
        with contextlib.suppress(OSError):
            return _bound_port(port)
    raise LocalPrometheusError(f"no free port in {first}-{first + WORKER_PORTS - 1}")


def _bound_port(port: int) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        return int(s.getsockname()[1])


def blocks_create(openmetrics: Path, data_dir: Path, *, expected_samples: int | None = None) -> str:
    """Backfill history into TSDB blocks. promtool drops out-of-order samples silently with exit 0,
    so the number it reports is checked against the number written."""
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data_dir)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise LocalPrometheusError(f"promtool failed: {proc.stderr.strip() or proc.stdout.strip()}")
    if expected_samples is not None:
        # promtool prints a table: BLOCK ULID, MIN TIME, MAX TIME, DURATION, NUM SAMPLES, ...
        counted = sum(int(m) for m in re.findall(r"^[0-9A-Z]{26}\s+\d+\s+\d+\s+\S+\s+(\d+)", proc.stdout, re.M))
        if counted and counted != expected_samples:
            raise LocalPrometheusError(f"promtool kept {counted} of {expected_samples} samples (out of order?)")
    return proc.stdout


def config_write(path: Path, *, targets: list[str], scrape_interval_s: int, job: str = "fleetwatt-sim") -> None:
    target_list = ", ".join(f'"{t}"' for t in targets)
    path.write_text(
        "global:\n"
        f"  scrape_interval: {scrape_interval_s}s\n"
        f"  evaluation_interval: {scrape_interval_s}s\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        f"    scrape_interval: {scrape_interval_s}s\n"
        f"    static_configs:\n      - targets: [{target_list}]\n"
        if targets
        else "global:\n  scrape_interval: 15s\nscrape_configs: []\n"
    )


@dataclass
class LocalPrometheus:
    data_dir: Path
    config: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, retention: str = "3650d", log: Path | None = None, timeout_s: float = 60.0) -> None:
        """Start it and wait until it answers, on a port of its own: a port found free may be taken by another
        process (another test process's server) before this one binds it, and then that server answers our
        readiness check while ours exits. So the server that answers must name our data folder, and where it does
        not, ours starts again on another free port (PORT_TRIES at most)."""
        for _ in range(PORT_TRIES):
            self._spawn(retention=retention, log=log)
            if self._ready_wait(log=log, timeout_s=timeout_s):
                return
            self.stop()
            self.port = free_port()
        raise LocalPrometheusError(f"prometheus found no free port in {PORT_TRIES} tries")

    def _spawn(self, *, retention: str, log: Path | None) -> None:
        # The child keeps its own copy of the log's descriptor: ours is closed once it started.
        with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.data_dir}",
                    f"--storage.tsdb.retention.time={retention}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-admin-api",
                    "--query.lookback-delta=5m",
                ],
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    def _ready_wait(self, *, log: Path | None, timeout_s: float) -> bool:
        """True once our server answers ready; False where another one holds the port."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self._serves_our_data()
            except requests.RequestException:
                pass
            if self.process.poll() is not None:
                raise LocalPrometheusError(f"prometheus exited with {self.process.returncode} (see {log})")
            time.sleep(0.2)
        raise LocalPrometheusError(f"prometheus did not become ready on port {self.port}")

    def _serves_our_data(self) -> bool:
        flags = requests.get(f"{self.url}/api/v1/status/flags", timeout=5).json()["data"]
        return bool(flags.get("storage.tsdb.path") == str(self.data_dir))

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None
