"""Real server processes for the tests that are about them: a private Redis, gunicorn as deployed, a
Celery worker; each on a free port, against the test database, and stopped by its own pid."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
import requests
from django.conf import settings
from django.db import connection

from apps.simulator.local_prometheus import free_port

ROOT = Path(__file__).resolve().parent.parent
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def child_database_url() -> str:
    """The test database, for a child process (pytest-django renamed it: the settings still name the
    developer's)."""
    params = {**settings.DATABASES["default"], "NAME": connection.settings_dict["NAME"]}
    return "postgres://{USER}@{HOST}:{PORT}/{NAME}".format(**params)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a server process the tests start: test settings, the test database, the
    tests' Redis (its own database: a running demo worker never takes a test's tasks)."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fleetwatt.test_settings",
        "DATABASE_URL": child_database_url(),
        "FLEETWATT_TEST_REDIS_URL": settings.CELERY_BROKER_URL,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def database_connections(*, besides: tuple[int, ...] = ()) -> int:
    """Connections to the test database other than this thread's own and those of the backends `besides`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND NOT pid = ANY(%s)",
            [list(besides)],
        )
        return int(cursor.fetchone()[0])


def database_backend() -> int:
    """This thread's database backend (its process id on the server)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def listening_addresses(port: int) -> set[str]:
    """The local addresses a TCP socket listens on at this port (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(_address(address))
    return found


def _address(hex_address: str) -> str:
    if len(hex_address) == 8:  # IPv4, little-endian
        return ".".join(str(int(hex_address[i : i + 2], 16)) for i in (6, 4, 2, 0))
    return "::" if int(hex_address, 16) == 0 else hex_address


@dataclass
class RedisServer:
    """A redis-server of the test's own: killing it is a Redis outage nobody else sees."""

    folder: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")],
        )  # fmt: skip
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        for _ in range(100):
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@contextlib.contextmanager
def redis_server(folder: Path) -> Iterator[RedisServer]:
    server = RedisServer(folder).start()
    try:
        yield server
    finally:
        server.kill()


@dataclass
class WebServer:
    """gunicorn with gunicorn.conf.py, as deployed, on 127.0.0.1 and a free port."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def web_server_start(log: Path, *, command: list[str] | None = None, env: dict[str, str] | None = None) -> WebServer:
    """Start the web server (gunicorn as deployed unless another command is given, with PORT in it
    replaced) and wait for its first answer."""
    port = free_port()
    argv = command or [sys.executable, "-m", "gunicorn", "fleetwatt.wsgi", "-c", "gunicorn.conf.py"]
    argv = [a.replace("{PORT}", str(port)) for a in argv]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={"GUNICORN_BIND": f"127.0.0.1:{port}", **(env or child_env())},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = WebServer(proc, port, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the web server exited: {server.output()}")
        with contextlib.suppress(requests.ConnectionError):
            requests.get(f"{server.url}/accounts/login/", timeout=5)
            return server
        time.sleep(0.2)
    web_server_stop(server)
    raise RuntimeError(f"the web server did not answer: {server.output()}")


def web_server_stop(server: WebServer) -> None:
    """Stop it and every process it started (its own session), by its pid."""
    if server.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGTERM)
        try:
            server.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=10)


def login(base_url: str, username: str, password: str) -> requests.Session:
    """Log in through the login page, as a browser does; the session carries the cookies."""
    session = requests.Session()
    page = session.get(f"{base_url}/accounts/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    answer = session.post(
        f"{base_url}/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302, (answer.status_code, answer.text[:500])
    return session
