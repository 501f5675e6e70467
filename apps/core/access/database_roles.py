"""Least privilege in the database: the app connects as a role that owns nothing.

Migrations run as the owner role (`DATABASE_OWNER_URL`, `manage.py migrate --database owner`); after
each migrate the owner grants the app role (`FLEETWATT_DB_APP_ROLE`) what the app needs: read and write
every table, except the audit log, which it may read and append to but not change, empty or alter.
Not owning the tables, the app role cannot ALTER, DISABLE or DROP the audit log's trigger, TRUNCATE it,
or set `session_replication_role` (superusers only). docs/operations.md, "Database roles".
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import sql

APPEND_ONLY_TABLES = ("waste_auditentry",)


def app_role_grant(*, connection: BaseDatabaseWrapper, role: str) -> None:
    """Grant `role` the app's privileges on every table and sequence of the current schema (and on those
    created later by the same owner), then take back all but SELECT and INSERT on the append-only tables."""
    name = sql.Identifier(role)
    statements = [
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(name),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}").format(name),
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(name),
        sql.SQL(
            "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {}"
        ).format(name),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {}").format(name),
    ]
    # The hour tables' months made ahead by beat and the ingest (apps.telemetry.partitions); dropping them
    # stays with the owner.
    statements.append(
        sql.SQL("GRANT EXECUTE ON FUNCTION fleetwatt_hour_partitions_ensure(date, date) TO {}").format(name)
    )
    for table in APPEND_ONLY_TABLES:
        statements.append(
            sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {} FROM {}").format(
                sql.Identifier(table), name
            )
        )
    with connection.cursor() as cursor:
        raw = cursor.connection  # psycopg's own connection: sql.Composed needs it to render identifiers
        for statement in statements:
            cursor.execute(statement.as_string(raw))
