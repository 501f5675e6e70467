"""What the containers of a container test reach on this machine: a database of the test's own on its
Postgres, with an owner role and an app role (docs/operations.md, "Database roles"), and a Redis of the
test's own (beat's schedule and the worker's queue never meet the suite's)."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from django.db import connection

from apps.simulator.local_prometheus import free_port


@dataclass(frozen=True)
class StackDatabase:
    name: str
    owner: str
    app: str
    admin_dsn: str  # the test's own connection, to the new database

    def url(self, role: str) -> str:
        return f"postgres://{role}@127.0.0.1:5432/{self.name}"

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection[Any]]:
        """The test's own connection to it, in UTC."""
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute("SET TIME ZONE 'UTC'")
            yield conn


def _admin() -> dict[str, Any]:
    settings = connection.settings_dict
    admin = {"host": settings["HOST"] or "127.0.0.1", "port": settings["PORT"] or 5432, "user": settings["USER"]}
    if settings["PASSWORD"]:
        admin["password"] = settings["PASSWORD"]
    return admin


@contextmanager
def database_with_roles(label: str) -> Iterator[StackDatabase]:
    """A database owned by an owner role, and an app role that owns nothing, both of the caller's own;
    dropped afterwards, whatever happened. Postgres trusts 127.0.0.1 here: no passwords."""
    suffix = uuid.uuid4().hex[:8]
    admin = _admin()
    name = f"{connection.settings_dict['NAME']}_{label}_{suffix}"
    db = StackDatabase(
        name=name,
        owner=f"fleetwatt_owner_{suffix}",
        app=f"fleetwatt_app_{suffix}",
        admin_dsn=psycopg.conninfo.make_conninfo(**admin, dbname=name),
    )
    try:
        with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{db.owner}" LOGIN')
            conn.execute(f'CREATE ROLE "{db.app}" LOGIN')
            conn.execute(f'CREATE DATABASE "{db.name}" OWNER "{db.owner}"')
        yield db
    finally:
        with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{db.app}"')
            conn.execute(f'DROP ROLE IF EXISTS "{db.owner}"')


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """A redis-server of the caller's own on a free port of 127.0.0.1, stopped afterwards; its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        cwd=folder,
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
