"""docker-compose.yml run by podman-compose with docker-compose.podman.yml: migrate, web, worker and beat
from the app's image, against this machine's Postgres (a database and two roles of the test's own) and a
Redis of the test's own (beat's and the worker's queues never meet the suite's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import requests
from celery import Celery
from django.db import connection

from apps.simulator.local_prometheus import free_port
from tests.deploy.containers import REPO, BuiltImage, podman, podman_env

PODMAN_COMPOSE = Path(sys.executable).parent / "podman-compose"
COMPOSE_FILES = ("-f", "docker-compose.yml", "-f", "docker-compose.podman.yml")


@dataclass(frozen=True)
class ComposeDatabase:
    name: str
    owner: str
    app: str
    admin_dsn: str  # the test's own connection, to the new database

    def url(self, role: str) -> str:
        return f"postgres://{role}@127.0.0.1:5432/{self.name}"


@pytest.fixture
def compose_database() -> Iterator[ComposeDatabase]:
    """A database owned by an owner role, and an app role that owns nothing (docs/operations.md, "Database
    roles"), both of this test's own; dropped afterwards. Postgres trusts 127.0.0.1 here: no passwords."""
    suffix = uuid.uuid4().hex[:8]
    settings = connection.settings_dict
    admin = {"host": settings["HOST"] or "127.0.0.1", "port": settings["PORT"] or 5432, "user": settings["USER"]}
    if settings["PASSWORD"]:
        admin["password"] = settings["PASSWORD"]
    db = ComposeDatabase(
        name=f"{settings['NAME']}_compose_{suffix}",
        owner=f"fleetwatt_owner_{suffix}",
        app=f"fleetwatt_app_{suffix}",
        admin_dsn=psycopg.conninfo.make_conninfo(**admin, dbname=f"{settings['NAME']}_compose_{suffix}"),
    )
    with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{db.owner}" LOGIN')
        conn.execute(f'CREATE ROLE "{db.app}" LOGIN')
        conn.execute(f'CREATE DATABASE "{db.name}" OWNER "{db.owner}"')
    try:
        yield db
    finally:
        with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{db.app}"')
            conn.execute(f'DROP ROLE IF EXISTS "{db.owner}"')


@pytest.fixture
def compose_redis(tmp_path: Path) -> Iterator[str]:
    """A Redis of the test's own, so that beat's schedule and the worker's queue stay apart from the suite's."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout.strip() != b"PONG":
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def compose(project: Path, name: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """podman-compose in the project. Compose fills `${NAME}` from its own environment before .env: the
    suite's DATABASE_URL must not reach the containers, so .env's settings are its environment too."""
    dotenv = dict(line.split("=", 1) for line in (project / ".env").read_text().splitlines())
    proc = subprocess.run(
        [str(PODMAN_COMPOSE), "--in-pod", "false", "-p", name, *COMPOSE_FILES, *args],
        cwd=project,
        env=podman_env() | dotenv,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert proc.returncode == 0, f"podman-compose {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.django_db
def test_compose_migrates_as_the_owner_and_serves_as_the_app_role(
    app_image: BuiltImage, compose_database: ComposeDatabase, compose_redis: str, tmp_path: Path
) -> None:
    # given the repository's compose files beside a .env pointing at this machine's services
    project = tmp_path / "project"
    project.mkdir()
    for name in ("docker-compose.yml", "docker-compose.podman.yml"):
        shutil.copy(REPO / name, project / name)
    port = free_port()
    env = {
        "FLEETWATT_IMAGE": app_image.tag,
        "DJANGO_SECRET_KEY": uuid.uuid4().hex * 2,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "CELERY_WORKER_CONCURRENCY": "1",
        "DATABASE_URL": compose_database.url(compose_database.app),
        "DATABASE_OWNER_URL": compose_database.url(compose_database.owner),
        "FLEETWATT_DB_APP_ROLE": compose_database.app,
        "REDIS_URL": compose_redis,
    }
    (project / ".env").write_text("".join(f"{name}={value}\n" for name, value in env.items()))
    name = f"fleetwatt-test-{uuid.uuid4().hex[:8]}"
    try:
        # when migrate runs to its end, then web, worker and beat start
        compose(project, name, "up", "-d", "--no-build", "--no-deps", "migrate")
        exit_code = podman("wait", f"{name}_migrate_1", timeout_s=300).stdout.strip()
        assert exit_code == "0", podman("logs", f"{name}_migrate_1").stderr[-3000:]
        compose(project, name, "up", "-d", "--no-build", "--no-deps", "web", "worker", "beat")
        deadline = time.monotonic() + 60
        while True:
            try:
                resp = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, podman("logs", f"{name}_web_1").stderr[-3000:]
                time.sleep(0.5)
        # then /healthz answers, with Postgres and Redis reached from the containers
        assert resp.status_code == 200, podman("logs", f"{name}_web_1").stderr[-3000:]
        assert resp.json()["checks"]["postgres"]["ok"] and resp.json()["checks"]["redis"]["ok"]
        # and the worker answers on the broker, and beat runs
        # (an app of its own that does not become Celery's current app: the suite's tasks keep their broker)
        broker = Celery(broker=compose_redis, set_as_current=False)
        try:
            deadline = time.monotonic() + 60
            while not (replies := broker.control.ping(timeout=2)):
                assert time.monotonic() < deadline, podman("logs", f"{name}_worker_1").stderr[-3000:]
        finally:
            broker.close()
        assert len(replies) == 1, replies
        for service in ("web", "worker", "beat"):
            state = podman("inspect", "--format", "{{.State.Running}}", f"{name}_{service}_1").stdout.strip()
            assert state == "true", f"{service}: {podman('logs', f'{name}_{service}_1').stderr[-2000:]}"
        # and the owner owns every table, the app's role none, and the app's role may not rewrite the audit log
        with psycopg.connect(compose_database.admin_dsn) as conn:
            owners = dict(
                conn.execute("SELECT tableowner, count(*) FROM pg_tables WHERE schemaname = 'public' GROUP BY 1")
            )
            assert set(owners) == {compose_database.owner}, owners
            rights = conn.execute(
                "SELECT has_table_privilege(%(app)s, 'waste_auditentry', 'INSERT'),"
                " has_table_privilege(%(app)s, 'waste_auditentry', 'UPDATE')",
                {"app": compose_database.app},
            ).fetchone()
            assert rights == (True, False)
            # and web's, the worker's and beat's connections are the app role's: no container holds the owner's URL
            roles = {
                row[0]
                for row in conn.execute(
                    "SELECT usename FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    (compose_database.name,),
                )
            }
            assert roles == {compose_database.app}, roles
        for service in ("web", "worker", "beat"):
            environment = podman("exec", f"{name}_{service}_1", "env").stdout
            assert f"DATABASE_OWNER_URL={compose_database.url(compose_database.owner)}" not in environment
    finally:
        try:
            compose(project, name, "down", "-v", "-t", "10")
        finally:
            for leftover in podman("ps", "-aq", "--filter", f"label=io.podman.compose.project={name}").stdout.split():
                podman("rm", "--force", leftover, check=False)
            podman("volume", "rm", "--force", f"{name}_pgdata", check=False)
