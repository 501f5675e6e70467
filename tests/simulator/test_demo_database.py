"""The demo's own database (apps/simulator/demo_database.py): only a database the demo marked as its own, with DEBUG
on, is ever the demo's; any other is refused with one line naming it (never its password) and the marker it lacks.
The demo's script and commands against "production": tests/faults/test_demo_guard.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from apps.simulator.demo_database import (
    MARKER_TABLE,
    NotTheDemoDatabase,
    database_named,
    demo_database_check,
    demo_database_ensure,
)

pytestmark = pytest.mark.django_db


def _mark() -> None:
    """The test database marked as the demo's, within the test's transaction (rolled back with it)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {MARKER_TABLE} (created_at timestamptz NOT NULL DEFAULT now(), note text)")


def test_a_database_is_named_by_name_host_and_port_never_its_password(settings: Any) -> None:
    named = database_named()
    params = connection.settings_dict
    assert named == f"database {params['NAME']!r} on {params['HOST'] or 'localhost'}:{params['PORT'] or 5432}"
    if params.get("PASSWORD"):
        assert params["PASSWORD"] not in named


def test_a_database_the_demo_did_not_mark_is_refused(settings: Any) -> None:
    settings.DEBUG = True
    with pytest.raises(NotTheDemoDatabase) as caught:
        demo_database_check()
    said = str(caught.value)
    assert said.startswith(f"refusing: {database_named()} was not created by `make demo`")
    assert MARKER_TABLE in said and "\n" not in said
    with pytest.raises(NotTheDemoDatabase):
        demo_database_ensure()  # it exists: checked, not created


def test_the_demos_own_database_is_taken_with_debug_on_only(settings: Any) -> None:
    _mark()
    settings.DEBUG = True
    demo_database_check()
    assert demo_database_ensure() is False  # there already: nothing created
    settings.DEBUG = False
    with pytest.raises(NotTheDemoDatabase, match="DJANGO_DEBUG=0 says this is not a demo"):
        demo_database_check()
    with pytest.raises(NotTheDemoDatabase, match="DJANGO_DEBUG=0"):
        demo_database_ensure()
