"""schemathesis against the project's own OpenAPI schema, over the real app and database: no server
errors, and every response conforms to the schema. (Run through hypothesis directly: schemathesis's
pytest plugin does not support this pytest.)"""

from __future__ import annotations

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from apps.pipeline.inputs import footprints_recompute
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
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
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
