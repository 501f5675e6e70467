"""A Prometheus of our own for the demo and the tests: Debian's `prometheus` and `promtool`, on a free
port, with its own config and data folder, loaded with simulated history through promtool."""

from __future__ import annotations

import contextlib
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
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
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalPrometheusError(f"prometheus exited with {self.process.returncode} (see {log})")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise LocalPrometheusError(f"prometheus did not become ready on port {self.port}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None
