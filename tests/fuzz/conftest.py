"""The fuzz suites' shared parts: a seeded fleet (every list has rows), the connection kept across WSGI requests,
and the count of cases each endpoint was asked, written to test-artifacts/fuzz-cases.json and summed up at the end
of the run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import signals
from django.db import close_old_connections

from tests.dashboard.test_fleet_dashboard import ARTIFACTS

FUZZ_CASES = "fuzz-cases.json"
CASES: Counter[str] = Counter()  # "GET /api/jobs/" (or a page's "GET /jobs/") -> cases asked
TRACEBACK_MARKS = ("Traceback (most recent call last)", "DEBUG = True")  # a traceback, Django's technical page


def case_count(endpoint: str) -> None:
    CASES[endpoint] += 1


def assert_no_server_error(endpoint: str, status: int, body: bytes, asked: Any) -> None:
    """No 5xx, and no traceback (nor Django's technical page) in the body."""
    case_count(endpoint)
    assert status < 500, f"{endpoint} answered {status} to {asked!r}"
    text = body.decode("utf-8", errors="replace")
    for mark in TRACEBACK_MARKS:
        assert mark not in text, f"{endpoint} answered a traceback ({mark!r}) to {asked!r}"


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Iterator[None]:
    """The WSGI handler closes the database connection after each request; the test's transaction needs it open
    (Django's own test client does the same)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The counts, for the run's summary (tests/conftest.py prints it; under pytest-xdist the fuzz tests run in
    one process of their own group, and the summary is printed by another)."""
    if CASES:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / FUZZ_CASES).write_text(json.dumps(dict(sorted(CASES.items())), indent=1) + "\n")


@pytest.fixture
def settings_debug(settings: Any) -> None:
    """DEBUG on, as `make demo` runs the app: an error must still be the site's page, no traceback."""
    settings.DEBUG = True
