"""schemathesis against the project's own OpenAPI schema, over the real app and database: no server
errors, and every response conforms to the schema. (Run through hypothesis directly: schemathesis's
pytest plugin does not support this pytest.) The pages, which the schema does not describe, are asked the
same way with arbitrary values for every query parameter they read: never a server error.
"""

from __future__ import annotations

from datetime import date, datetime

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from apps.pipeline.inputs import footprints_recompute
from tests.api.world import world_build
from tests.carbon.fleet_builder import fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """The WSGI handler closes the database connection after each request; the test's transaction
    needs it open (Django's own test client does the same)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_api_conforms_to_its_schema() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:2], hours=3, power_w=500)
    footprints_recompute()
    admin = User.objects.create_user("schema-admin", is_staff=True)
    headers = {"Authorization": f"Token {Token.objects.create(user=admin).key}"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application(), headers=headers)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
        )
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers, checks=[not_a_server_error, response_schema_conformance])

        check()


# The pages are not in the API's schema: each is asked with arbitrary strings for every parameter it reads.
ODD_STRINGS = ["", "0", "-1", "²", "١٢", "1e309", "NaN", "0001-01-01", "0001-01-03", "9999-12-31", "2026-02-30",
               "2026-11-02T00:00:00+23:59", "9" * 40, "\x00", "true", "open", "vision"]  # fmt: skip
ODD_VALUES = st.one_of(
    st.sampled_from(ODD_STRINGS),
    st.text(max_size=30),
    st.dates().map(date.isoformat),
    st.datetimes().map(datetime.isoformat),
    st.integers().map(str),
)
DATES = ("start", "end")
PAGES = {  # path (team B's objects), the parameters the page reads
    "/": DATES,
    "/teams/{team}/": DATES,
    "/gpus/{gpu}/": DATES,
    "/jobs/{job}/": DATES,
    "/audit/": ("kind", "status", "team", "cluster", "older_than_days"),
    "/reports/": ("team", "fleet", "status", "week_start", "since"),
    "/reports/{report}/": (),
    "/reports/preview/": ("team", "week"),
    "/reports/teams/{team}/recipients/": (),
    "/tokens/": (),
}


@pytest.mark.parametrize("path", list(PAGES))
def test_pages_answer_arbitrary_query_parameters_without_a_server_error(path: str) -> None:
    world = world_build()
    admin, member = Client(raise_request_exception=False), Client(raise_request_exception=False)
    admin.force_login(world.users["admin"])
    member.force_login(world.users["member"])
    url = path.format(team=world.team_b.pk, gpu=world.gpu_b.pk, job=world.job_b.pk, report=world.report_b.pk)
    params = PAGES[path] or ("start", "page", "x")  # a page that reads none must ignore what it is given

    @given(query=st.fixed_dictionaries({}, optional={p: ODD_VALUES for p in params}))
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
    def check(query: dict[str, str]) -> None:
        for client in (admin, member):
            response = client.get(url, query)
            assert response.status_code < 500, (url, query, response.status_code)

    check()
