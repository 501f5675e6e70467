"""The demo's web server (runserver, CONN_MAX_AGE=60) kept a Postgres connection per request thread: 20
concurrent clients took the server's 100 connections and starved every other database on it; and it
listened on 0.0.0.0 with DEBUG on. Now the demo serves with gunicorn as deployed, on 127.0.0.1.

The load run: `ab -c 20 -n 400` (Debian's apache2-utils) against every API list endpoint with a named
token and against a team page with a session cookie, through the demo's own web server command, against
the test database; the connections to it are counted in pg_stat_activity before, during and after. The
run stops the server as soon as it holds more connections than its processes can use, so that a leak
never starves the other databases of the shared server."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from apps.core.access.policy import FINANCE_GROUP
from apps.core.models import ApiToken
from tests.factories import (
    AuditEntryFactory,
    FlagFactory,
    JobFactory,
    JobGpuHourFactory,
    TeamDayFactory,
    TeamFactory,
    TeamMembershipFactory,
    UserFactory,
    WeeklyReportFactory,
)
from tests.servers import (
    WebServer,
    child_env,
    database_backend,
    database_connections,
    listening_addresses,
    web_server_start,
    web_server_stop,
)

AB = shutil.which("ab")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(AB is None, reason="needs ab (Debian's apache2-utils)"),
]

LIST_ENDPOINTS = [
    "/api/jobs/",
    "/api/gpus/",
    "/api/teams/",
    "/api/clusters/",
    "/api/job-groups/",
    "/api/flags/",
    "/api/audit-log/",
    "/api/reports/",
]
WORKERS, THREADS = 2, 1  # the demo's gunicorn as on a 2-core machine: WEB_CONCURRENCY x GUNICORN_THREADS


@dataclass
class LoadRun:
    complete: int
    failed: int
    non_2xx: int


def ab(url: str, *, header: str, clients: int = 20, requests: int = 400) -> LoadRun:
    answer = subprocess.run(
        [AB, "-q", "-l", "-r", "-s", "30", "-c", str(clients), "-n", str(requests), "-H", header, url],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = answer.stdout + answer.stderr

    def figure(label: str) -> int:
        found = re.search(rf"^{label}:\s+(\d+)", out, re.M)
        return int(found.group(1)) if found else 0

    assert "Complete requests" in out, out
    return LoadRun(figure("Complete requests"), figure("Failed requests"), figure("Non-2xx responses"))


class ConnectionWatch(threading.Thread):
    """Samples the test database's connections while the load runs; stops the server past a limit."""

    def __init__(self, server: WebServer, limit: int) -> None:
        super().__init__(daemon=True)
        self.server, self.limit, self.peak = server, limit, 0
        self.test_backend = database_backend()  # the test's own connection is not the server's
        self.tripped = False
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                self.peak = max(self.peak, database_connections(besides=(self.test_backend,)))
                if self.peak > self.limit and not self.tripped:
                    self.tripped = True
                    web_server_stop(self.server)
                time.sleep(0.1)
        finally:
            connection.close()


@pytest.fixture
def world() -> dict[str, object]:
    team = TeamFactory(name="vision")
    member = UserFactory(username="ada")
    TeamMembershipFactory(user=member, team=team)
    finance = UserFactory(username="fin")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    for _ in range(5):
        job = JobFactory(team=team)
        JobGpuHourFactory(job=job)
        FlagFactory(job=job)
        AuditEntryFactory(job=job)
    TeamDayFactory(team=team)
    WeeklyReportFactory(team=team)
    client = Client()
    client.force_login(member)
    return {
        "team": team,
        # A token per endpoint: each is throttled on its own (FLEETWATT_API_TOKEN_RATE), as a tool's is.
        "keys": {path: ApiToken.issue(user=finance, name=path)[1] for path in LIST_ENDPOINTS},
        "session": client.cookies["sessionid"].value,
    }


@pytest.fixture
def demo_web(tmp_path: Path) -> Iterator[WebServer]:
    """The web server as `make demo` starts it (scripts/demo_web.sh), on a free port, DEBUG on as in the demo."""
    env = child_env(DJANGO_DEBUG="1", WEB_CONCURRENCY=str(WORKERS), GUNICORN_THREADS=str(THREADS))
    server = web_server_start(tmp_path / "web.log", command=["bash", "scripts/demo_web.sh", "{PORT}"], env=env)
    yield server
    web_server_stop(server)


def test_twenty_clients_get_only_2xx_and_leave_no_connection_open(world, demo_web: WebServer) -> None:
    # given the demo's web server
    before = database_connections()
    watch = ConnectionWatch(demo_web, limit=before + WORKERS * THREADS)
    watch.start()
    runs: dict[str, LoadRun] = {}
    try:
        # when 20 clients ask each list endpoint, and the team page, 400 times
        for path in LIST_ENDPOINTS:
            runs[path] = ab(f"{demo_web.url}{path}", header=f"Authorization: Bearer {world['keys'][path]}")
            assert not watch.tripped, f"{path}: {watch.peak} connections (limit {watch.limit}); server stopped"
        team_page = f"/teams/{world['team'].pk}/"
        runs[team_page] = ab(f"{demo_web.url}{team_page}", header=f"Cookie: sessionid={world['session']}")
    finally:
        watch.done.set()
        watch.join(timeout=10)
    time.sleep(1.0)
    after = database_connections()
    # then it listened on loopback only, every answer was a 2xx, and the server held no more connections
    # than it has threads to use them
    assert listening_addresses(demo_web.port) == {"127.0.0.1"}
    assert {p: (r.complete, r.failed + r.non_2xx) for p, r in runs.items()} == {p: (400, 0) for p in runs}
    assert not watch.tripped and watch.peak <= before + WORKERS * THREADS, (before, watch.peak)
    assert after <= before + WORKERS * THREADS, (before, after)
    # and none outlives the server
    web_server_stop(demo_web)
    time.sleep(0.5)
    assert database_connections() == before
