"""`make demo` emptied whatever DATABASE_URL named (read from .env when not exported), and `demo_setup`
created admin / fleetwatt-admin with DJANGO_DEBUG=0: a production .env plus `make demo` wiped production,
audit log included. Now the demo only touches a database it created itself (marked by a table of its
own), and refuses any other with one line; `demo_setup` refuses with DEBUG off or outside that database.

Tried with the demo's own script and commands, against the test database as "production"."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection

from apps.fleet.models import Team
from apps.simulator.demo_database import MARKER_TABLE
from apps.waste.models import AuditEntry
from tests.factories import AuditEntryFactory, TeamFactory
from tests.servers import ROOT, child_database_url, child_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def marked_as_demo() -> Iterator[None]:
    """The test database marked as the demo's own, as `demo_database` marks the one it creates."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {MARKER_TABLE} (created_at timestamptz NOT NULL DEFAULT now())")
        cursor.execute(f"INSERT INTO {MARKER_TABLE} DEFAULT VALUES")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {MARKER_TABLE}")


@pytest.fixture
def production() -> AuditEntry:
    """Rows a production database holds: a team, a job, an admin's decision in the audit log."""
    TeamFactory(name="vision")
    return AuditEntryFactory()


def test_make_demo_refuses_a_database_it_did_not_create(production: AuditEntry) -> None:
    # given DATABASE_URL naming a database with data the demo did not create
    env = child_env(DATABASE_URL=child_database_url(), DJANGO_DEBUG="1")
    env.pop("DJANGO_SETTINGS_MODULE")  # as a shell runs it
    # when the demo is started on it
    proc = subprocess.Popen(["bash", "scripts/demo.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    # then it stops at once with one line naming the database, and the data is all there
    assert proc.returncode == 1, output[-2000:]
    lines = output.strip().splitlines()
    assert len(lines) == 1 and "refus" in lines[0] and connection.settings_dict["NAME"] in lines[0], output
    assert AuditEntry.objects.filter(pk=production.pk).exists()
    assert Team.objects.filter(name="vision").exists()


def test_demo_setup_refuses_with_debug_off(production: AuditEntry, marked_as_demo: None, settings) -> None:
    # given a production-like setting (DEBUG off) on the demo's own database
    settings.DEBUG = False
    # when demo_setup is run, then it refuses and creates no login
    with pytest.raises(CommandError, match="DJANGO_DEBUG"):
        call_command("demo_setup", prometheus_url="http://127.0.0.1:9")
    assert not User.objects.filter(username__in=["admin", "ada", "fin"]).exists()


def test_demo_setup_refuses_a_database_not_the_demos(production: AuditEntry, settings) -> None:
    # given DEBUG on, but a database the demo did not create
    settings.DEBUG = True
    # when demo_setup is run, then it refuses and creates no login
    with pytest.raises(CommandError, match="refus"):
        call_command("demo_setup", prometheus_url="http://127.0.0.1:9")
    assert not User.objects.filter(username="admin").exists()


def test_demo_setup_creates_the_logins_on_the_demos_database(
    production: AuditEntry, marked_as_demo: None, settings
) -> None:
    settings.DEBUG = True
    call_command("demo_setup", prometheus_url="http://127.0.0.1:9")
    assert User.objects.get(username="admin").check_password("fleetwatt-admin")


@pytest.fixture
def new_database_url() -> Iterator[str]:
    name = f"{connection.settings_dict['NAME']}_demo"
    yield child_database_url().rsplit("/", 1)[0] + f"/{name}"
    with _maintenance() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_demo_creates_its_own_database_and_resets_only_that(new_database_url: str) -> None:
    env = child_env(DATABASE_URL=new_database_url, DJANGO_DEBUG="1")
    env.pop("DJANGO_SETTINGS_MODULE")
    # given no database by that name; when the demo resets its database twice
    for _ in range(2):
        done = subprocess.run([".venv/bin/python", "manage.py", "demo_database", "--reset"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    # then it was created, marked as the demo's, migrated, and it is empty
    with psycopg.connect(new_database_url, autocommit=True) as demo:
        assert demo.execute(f"SELECT count(*) FROM {MARKER_TABLE}").fetchone() == (1,)
        assert demo.execute("SELECT count(*) FROM auth_user").fetchone() == (0,)


def _maintenance() -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(host=params["HOST"] or "127.0.0.1", port=params["PORT"] or 5432, user=params["USER"],
                           dbname="postgres", autocommit=True)  # fmt: skip
