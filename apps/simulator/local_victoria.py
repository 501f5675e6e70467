"""A VictoriaMetrics of our own for the tests: Debian's `victoria-metrics` (single node) on a free port with
its own data folder, loaded with simulated history through /api/v1/import/prometheus; and `vmauth` (same
package) in front of it, to test the connection settings (bearer token, basic auth, TLS).

The flags are the ones fleetwatt needs of any VictoriaMetrics it reads (docs/operations.md, "Engines")."""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from .exposition import MS_PER_DAY, WrittenSamples
from .local_prometheus import PORT_TRIES, free_port

VICTORIA_METRICS = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
VMAUTH = shutil.which("vmauth") or "/usr/bin/vmauth"

# What makes VictoriaMetrics answer the ingest's queries as Prometheus does (docs/operations.md, "Engines").
VICTORIA_QUERY_FLAGS = (
    "-search.latencyOffset=0s",  # an hour just closed is answered whole, not 30 s short
    "-search.maxLookback=5m",  # Prometheus's --query.lookback-delta: an instant selector sees a sample 5 min back
    "-search.disableCache",  # history imported after a query is seen by the next one
)


class LocalVictoriaError(RuntimeError):
    pass


def _ready_wait(
    process: subprocess.Popen[bytes],
    url: str,
    *,
    what: str,
    timeout_s: float,
    ours: Callable[[], bool],
    verify: str | bool = True,
) -> bool:
    """True once the server at `url` answers and is ours (`ours`: it names our data or config); False where another
    one holds the port (a port found free may be taken by another test process's server before ours binds it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=1, verify=verify)
        except requests.RequestException:
            if process.poll() is not None:
                raise LocalVictoriaError(f"{what} exited with {process.returncode}") from None
            time.sleep(0.1)
            continue
        return ours()  # any answer: it listens (vmauth answers 401 without credentials)
    raise LocalVictoriaError(f"{what} did not become ready at {url}")


def _flag_is(base: str, name: str, value: Path, *, verify: str | bool = True) -> bool:
    """Whether the VictoriaMetrics binary at `base` runs with `-name="value"` (its /flags page)."""
    return f'-{name}="{value}"' in requests.get(f"{base}/flags", timeout=5, verify=verify).text


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class LocalVictoria:
    """VictoriaMetrics single node with its own data folder, on 127.0.0.1."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, retention: str = "100y", log: Path | None = None, timeout_s: float = 60.0) -> None:
        """Start it on a port of its own (another free one where another server took the one found free)."""
        for _ in range(PORT_TRIES):
            with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
                self.process = subprocess.Popen(
                    [
                        VICTORIA_METRICS,
                        f"-storageDataPath={self.data_dir}",
                        f"-retentionPeriod={retention}",  # the tests' history is dated: keep it whatever the day
                        f"-httpListenAddr=127.0.0.1:{self.port}",
                        *VICTORIA_QUERY_FLAGS,
                    ],
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            ours = functools.partial(_flag_is, self.url, "storageDataPath", self.data_dir)
            if _ready_wait(self.process, f"{self.url}/health", what="victoria-metrics", timeout_s=timeout_s, ours=ours):
                return
            self.stop()
            self.port = free_port()
        raise LocalVictoriaError(f"victoria-metrics found no free port in {PORT_TRIES} tries")

    def history_import(self, text: Path, *, expected: WrittenSamples | None = None, timeout_s: float = 60.0) -> None:
        """Import Prometheus text exposition lines with millisecond timestamps, flush them, and, given what was
        written, wait until a query of each UTC day finds that day's samples. A line VictoriaMetrics cannot read is
        skipped and only logged, hence the count; and it is taken day by day because a query of a few days finds
        its series through the per-day index, whose entries for freshly imported history may be searchable later
        than the series themselves (a query of all time goes through the global index)."""
        with text.open("rb") as body:
            answer = requests.post(f"{self.url}/api/v1/import/prometheus", data=body, timeout=300)
        if answer.status_code >= 300:
            raise LocalVictoriaError(f"import failed: HTTP {answer.status_code}: {answer.text.strip()}")
        requests.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()
        if expected is None:
            return
        deadline = time.monotonic() + timeout_s
        for day, written in sorted(expected.per_day.items()):
            first_ms, last_ms = day * MS_PER_DAY, (day + 1) * MS_PER_DAY - 1
            while (held := self.samples_count(first_ms, last_ms)) != written:
                if held > written or time.monotonic() > deadline:
                    raise LocalVictoriaError(f"victoria-metrics finds {held} of {written} samples on day {day}")
                time.sleep(0.2)

    def samples_count(self, first_ms: int | None = None, last_ms: int | None = None) -> int:
        """Every raw sample it holds (between two instants, both included), through the export API (one series
        per line, no deduplication)."""
        span = (
            {}
            if first_ms is None or last_ms is None
            else {"start": f"{first_ms / 1000:.3f}", "end": f"{last_ms / 1000:.3f}"}
        )
        answer = requests.post(
            f"{self.url}/api/v1/export", data={"match[]": '{__name__!=""}', **span}, timeout=300, stream=True
        )
        answer.raise_for_status()
        return sum(line.count(b",") + 1 for line in _values_arrays(answer.iter_lines()))

    def stop(self) -> None:
        _stop(self.process)
        self.process = None


def _values_arrays(lines: Iterable[bytes]) -> list[bytes]:
    """The `"values":[...]` part of each line of /api/v1/export's JSON lines."""
    out = []
    for line in lines:
        start = line.index(b'"values":[') + len(b'"values":[')
        out.append(line[start : line.index(b"]", start)])
    return out


@dataclass
class LocalVmauth:
    """vmauth on 127.0.0.1 in front of `upstream`, with the given auth config (users and their credentials);
    over TLS when a certificate and key are given."""

    config: Path
    upstream: str
    port: int = field(default_factory=free_port)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert else "http"
        # The certificate names 127.0.0.1 (local_tls_certificate), so the address is the IP.
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self, *, log: Path | None = None, timeout_s: float = 30.0) -> None:
        """Start it on a port of its own (another free one where another server took the one found free)."""
        tls = ["-tls", f"-tlsCertFile={self.tls_cert}", f"-tlsKeyFile={self.tls_key}"] if self.tls_cert else []
        verify = str(self.tls_cert) if self.tls_cert else True
        for _ in range(PORT_TRIES):
            with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
                self.process = subprocess.Popen(
                    [VMAUTH, f"-auth.config={self.config}", f"-httpListenAddr=127.0.0.1:{self.port}", *tls],
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            ours = functools.partial(_flag_is, self.url, "auth.config", self.config, verify=verify)
            if _ready_wait(
                self.process, f"{self.url}/health", what="vmauth", timeout_s=timeout_s, ours=ours, verify=verify
            ):
                return
            self.stop()
            self.port = free_port()
        raise LocalVictoriaError(f"vmauth found no free port in {PORT_TRIES} tries")

    def stop(self) -> None:
        _stop(self.process)
        self.process = None


def vmauth_config_write(
    path: Path, *, upstream: str, bearer_token: str | None = None, username: str | None = None, password: str = ""
) -> None:
    """An auth config of one user, known by a bearer token or by a username and password."""
    if bearer_token:
        credentials = f"  - bearer_token: {_quoted(bearer_token)}\n"
    elif username:
        credentials = f"  - username: {_quoted(username)}\n    password: {_quoted(password)}\n"
    else:
        raise ValueError("a vmauth user needs a bearer token or a username")
    path.write_text(f"users:\n{credentials}    url_prefix: {_quoted(upstream)}\n")


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def local_tls_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made with openssl: the server's certificate
    and, being self-signed, its own CA bundle."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "server.crt", folder / "server.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
