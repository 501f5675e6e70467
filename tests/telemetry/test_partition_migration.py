"""Upgrading a database that holds history: migration telemetry 0006 turns the three hour tables into tables
partitioned by month without losing a row, keeps their unique constraints, and ids go on from where they were.

Run on a scratch database of its own (the test database is migrated already): `manage.py migrate` up to
telemetry 0005 for every app, rows written as the release before wrote them, then the migration."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from tests.servers import ROOT, child_env

pytestmark = pytest.mark.django_db  # for the server's address; the test database is not touched

# Rows as the release before wrote them, through the models (every column filled as the ingest fills it).
ROWS = """
import django
django.setup()
from datetime import UTC, datetime
from apps.telemetry.models import GpuHour
# The release before had no columns of the idle line's unseen part (telemetry 0009) nor of the GPU's power limit
# and SM clock (telemetry 0012): its models wrote none.
LATER = ("unseen_", "power_limit", "sm_clock")
meta = GpuHour._meta
meta.local_fields[:] = [f for f in meta.local_fields if not f.name.startswith(LATER)]
meta._expire_cache()
from tests.carbon.fleet_builder import fleet_build, job_run
fleet = fleet_build(servers=1, gpus_per_server=1)
job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=60, power_w=500, start=datetime(2026, 9, 30, 12, tzinfo=UTC))
"""


def _manage(database_url: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args, "--verbosity", "0"],
        cwd=ROOT, env=child_env(DATABASE_URL=database_url, DJANGO_DEBUG="1"), check=True,
    )  # fmt: skip


@pytest.fixture
def scratch() -> Iterator[str]:
    """A database of its own, made and dropped over the server's maintenance database."""
    name = f"fleetwatt_upgrade_{secrets.token_hex(4)}"
    params = connection.settings_dict
    server = f"postgres://{params['USER']}@{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{server}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_hour_tables_become_monthly_partitions_with_every_row(scratch: str) -> None:
    # given a database of the release before (telemetry 0005), with sixty hours of history across a month's end
    _manage(scratch, "migrate", "telemetry", "0005")
    for app in ("fleet", "carbon", "jobs", "waste", "rollups", "reports", "core"):
        _manage(scratch, "migrate", app)
    subprocess.run(
        [sys.executable, "-c", ROWS], cwd=ROOT, check=True,
        env=child_env(DATABASE_URL=scratch, DJANGO_DEBUG="1", DJANGO_SETTINGS_MODULE="fleetwatt.settings"),
    )  # fmt: skip
    with psycopg.connect(scratch, autocommit=True) as db:
        assert db.execute("SELECT relkind FROM pg_class WHERE relname = 'jobs_jobgpuhour'").fetchone() == ("r",)
        before = db.execute("SELECT count(*), sum(energy_j), max(id) FROM jobs_jobgpuhour").fetchone()
    # when the migration runs
    _manage(scratch, "migrate", "telemetry")
    # then each hour table is partitioned by month, holding every row in its month's partition
    with psycopg.connect(scratch, autocommit=True) as db:
        for table in ("telemetry_gpuhour", "jobs_jobgpuhour", "jobs_jobgpuhourenergy"):
            assert db.execute("SELECT relkind FROM pg_class WHERE relname = %s", [table]).fetchone() == ("p",)
        assert db.execute("SELECT count(*), sum(energy_j), max(id) FROM jobs_jobgpuhour").fetchone() == before
        months = dict(db.execute("SELECT to_char(hour, 'YYYYMM'), count(*) FROM jobs_jobgpuhour GROUP BY 1").fetchall())
        assert months == {"202609": 12, "202610": 48}
        assert db.execute("SELECT count(*) FROM jobs_jobgpuhour_p202609").fetchone() == (12,)
        assert db.execute("SELECT count(*) FROM jobs_jobgpuhour_default").fetchone() == (0,)
        # and its unique constraint holds across the partitions, and new ids follow the old ones
        copy = (
            "INSERT INTO jobs_jobgpuhour SELECT (r).* FROM (SELECT r FROM jobs_jobgpuhour r "
            "WHERE hour = '2026-10-01 01:00+00') x"
        )
        with pytest.raises(psycopg.errors.UniqueViolation):
            db.execute(copy)  # the same job, GPU, hour and source again (and the same id)
        columns = ", ".join(
            name
            for (name,) in db.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs_jobgpuhour' "
                "AND column_name NOT IN ('id', 'hour') ORDER BY ordinal_position"
            ).fetchall()
        )
        fresh = db.execute(
            f"INSERT INTO jobs_jobgpuhour (hour, {columns}) SELECT '2026-12-05 01:00+00', {columns} "
            "FROM jobs_jobgpuhour LIMIT 1 RETURNING id"
        ).fetchone()
        assert fresh == (before[2] + 1,)
        # and the columns added since (the idle line's unseen part) hold zero in every old row and partition
        assert db.execute(
            "SELECT count(*), sum(unseen_j), sum(unseen_s), sum(unseen_cost) FROM telemetry_gpuhour"
        ).fetchone() == (60, 0.0, 0.0, 0)
