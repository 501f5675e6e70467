"""The demo's own database. `make demo` empties the database it uses, so it only ever uses one it created
itself: created by `manage.py demo_database` when missing, and marked there by a table of the demo's own
(`MARKER_TABLE`, no model's: migrations and `flush` leave it alone). A database without it (production's,
a developer's, a test's) is refused, and so is DJANGO_DEBUG=0: the demo creates well-known logins."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connection

MARKER_TABLE = "fleetwatt_demo_database"
MARKER_NOTE = "created by `make demo`, which empties this database on every run"


class NotTheDemoDatabase(Exception):
    """The database, or the settings, are not the demo's: nothing was touched."""


def database_named() -> str:
    """The database of the default connection, by name, host and port (never its password)."""
    params = connection.settings_dict
    return f"database {params['NAME']!r} on {params['HOST'] or 'localhost'}:{params['PORT'] or 5432}"


def demo_database_check() -> None:
    """Refuse (NotTheDemoDatabase) unless DEBUG is on and the database is marked as the demo's."""
    if not settings.DEBUG:
        raise NotTheDemoDatabase(
            "refusing: DJANGO_DEBUG=0 says this is not a demo, and the demo empties its database and creates "
            "well-known logins (admin / fleetwatt-admin)"
        )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [MARKER_TABLE])
            marked = bool(cursor.fetchone()[0])
    except DatabaseError as exc:
        raise NotTheDemoDatabase(f"refusing: cannot read {database_named()} ({exc.__class__.__name__})") from exc
    if not marked:
        raise NotTheDemoDatabase(
            f"refusing: {database_named()} was not created by `make demo` (it has no {MARKER_TABLE} table), "
            "and the demo empties the database it uses; point DATABASE_URL (exported, or in .env) at one of the "
            "demo's own, e.g. postgres://postgres@127.0.0.1:5432/fleetwatt_demo (created when missing)"
        )


def demo_database_ensure() -> bool:
    """Create the database when it does not exist and mark it as the demo's (True); otherwise check that
    it is the demo's (False), refusing with NotTheDemoDatabase."""
    if not settings.DEBUG:
        demo_database_check()
    try:
        connection.ensure_connection()
    except DatabaseError:
        _database_create()  # it may not exist yet
    else:
        demo_database_check()
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {MARKER_TABLE} (created_at timestamptz NOT NULL DEFAULT now(), note text)")
        cursor.execute(f"INSERT INTO {MARKER_TABLE} (note) VALUES (%s)", [MARKER_NOTE])
    return True


def _database_create() -> None:
    """CREATE DATABASE, from the server's maintenance database; refused when it exists after all (the
    connection failed for another reason) or the server cannot be reached."""
    name = connection.settings_dict["NAME"]
    try:
        with connection._nodb_cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if cursor.fetchone() is not None:
                raise NotTheDemoDatabase(f"refusing: cannot connect to {database_named()}")
            cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
    except DatabaseError as exc:
        raise NotTheDemoDatabase(f"refusing: cannot reach {database_named()} ({exc.__class__.__name__})") from exc
