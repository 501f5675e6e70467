"""The append-only audit log was only append-only for others: the app's database user owned the table,
so TRUNCATE, ALTER TABLE ... DISABLE TRIGGER, SET session_replication_role and DROP TRIGGER all worked.
Now the app connects as a role that owns nothing; tried here as that role, over its own connection."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection

from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job
from apps.waste.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def app_role(settings) -> Iterator[str]:
    """A login role like production's app role, granted by the migrate that the owner runs."""
    role = f"fleetwatt_app_{secrets.token_hex(4)}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN')
    settings.FLEETWATT_DB_APP_ROLE = role
    try:
        call_command("migrate", verbosity=0)  # nothing to apply: post_migrate grants the role
        yield role
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{role}"')
            cursor.execute(f'DROP ROLE "{role}"')


@pytest.fixture
def as_app(app_role: str) -> Iterator[psycopg.Connection]:
    params = connection.settings_dict
    with psycopg.connect(
        host=params["HOST"] or "127.0.0.1", port=params["PORT"] or 5432, dbname=params["NAME"], user=app_role,
        autocommit=True,
    ) as conn:  # fmt: skip
        yield conn


@pytest.fixture
def entry() -> AuditEntry:
    cluster = Cluster.objects.create(name="c1", prometheus_url="http://127.0.0.1:9")
    job = Job.objects.create(cluster=cluster, job_key="slurm/1", team=Team.objects.create(name="vision"))
    admin = User.objects.create_user("root", is_staff=True)
    return AuditEntry.objects.create(actor=admin, action="exclude", job=job, reason="first")


def test_the_app_role_reads_and_appends_to_the_audit_log(as_app: psycopg.Connection, entry: AuditEntry) -> None:
    assert as_app.execute("SELECT count(*) FROM waste_auditentry").fetchone() == (1,)
    as_app.execute(
        "INSERT INTO waste_auditentry (at, actor_id, action, job_id, flag_kind, reason, before, after) "
        "VALUES (now(), %s, 'include', %s, '', 'second', '{}', '{}')",
        [entry.actor_id, entry.job_id],
    )
    assert AuditEntry.objects.count() == 2


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE waste_auditentry SET reason = 'rewritten'",
        "DELETE FROM waste_auditentry",
        "TRUNCATE waste_auditentry",
        "ALTER TABLE waste_auditentry DISABLE TRIGGER ALL",
        "DROP TRIGGER waste_auditentry_no_update_delete ON waste_auditentry",
        "SET session_replication_role = replica",
        "DROP TABLE waste_auditentry",
    ],
)
def test_the_app_role_cannot_rewrite_empty_or_unguard_the_audit_log(
    as_app: psycopg.Connection, entry: AuditEntry, statement: str
) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_app.execute(statement)
    assert list(AuditEntry.objects.values_list("reason", flat=True)) == ["first"]


def test_the_app_role_still_writes_everything_else(as_app: psycopg.Connection, entry: AuditEntry) -> None:
    as_app.execute("UPDATE jobs_job SET name = 'renamed'")
    as_app.execute("INSERT INTO fleet_team (name, display_name) VALUES ('nlp', 'NLP')")
    as_app.execute("DELETE FROM fleet_team WHERE name = 'nlp'")
    assert Job.objects.get().name == "renamed"


def test_the_app_role_makes_months_of_the_hour_tables_but_cannot_drop_them(as_app: psycopg.Connection) -> None:
    # beat and the ingest make months ahead, as the app's role, through the owner's function
    assert as_app.execute("SELECT fleetwatt_hour_partitions_ensure('2031-01-01', '2031-01-01')").fetchone() == (3,)
    # dropping history stays with the owner (`manage.py hour_rows_expire` runs as it)
    for statement in (
        "SELECT fleetwatt_hour_partitions_drop_before('2031-02-01')",
        "DROP TABLE jobs_jobgpuhour_p203101",
        "ALTER TABLE jobs_jobgpuhour DETACH PARTITION jobs_jobgpuhour_p203101",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            as_app.execute(statement)
