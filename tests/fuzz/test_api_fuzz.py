"""schemathesis over the project's own OpenAPI schema, over the real app and database (issue: no input breaks it):
every operation, as each role (anonymous, a member and a lead of team A, finance by its session and by its named API
token, an admin, a user in no team), with valid data (every answer then conforms to the schema) and with data that
breaks the schema (schemathesis's negative mode), strings over the whole of Unicode with NUL bytes (its `utf-8`
codec, `allow_x00`). Half the cases name a real object of the role's (its job, team, flag...), so that the
parameters are read past the object's lookup; a third of them send, for the operation's query parameters, odd
values (tests/fuzz/values.py). Then a sweep: each query parameter of each operation asked, one at a time, with each
value of its kind that broke an endpoint before (years 0 and 9999, other digits, a trailing newline, NUL, cursors no
page wrote), as an admin and as a member. Checked: no 5xx, no traceback in the body. Run through hypothesis
directly (schemathesis's pytest plugin does not support this pytest), with a fixed seed per operation, role and
mode, so that a run is repeatable; the cases per endpoint are counted (tests/fuzz/conftest.py).

The budget: `EXAMPLES` (about 860 random cases) and the sweep (about 1,400), about a minute on two cores."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from apps.pipeline import decisions
from tests.api.world import World, world_build

from .conftest import assert_no_server_error
from .values import ODD_BY_PARAMETER, ODD_PERIODS, ODD_TEXT, ODD_VALUES

# (hypothesis warns when it writes out a schemathesis strategy: the schema's whole operation)
pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore:Generating overly large repr")]

POSITIVE, NEGATIVE = GenerationMode.POSITIVE, GenerationMode.NEGATIVE
# Cases per operation, by role and mode: the admin reaches every parameter of every operation; the others are asked
# fewer (their answers part earlier: 401, 403, 404 of another team's object).
EXAMPLES: dict[str, dict[GenerationMode, int]] = {
    "admin": {POSITIVE: 5, NEGATIVE: 6},
    "member": {POSITIVE: 2, NEGATIVE: 3},
    "finance-token": {POSITIVE: 2, NEGATIVE: 3},
    "finance": {POSITIVE: 1, NEGATIVE: 2},
    "lead": {POSITIVE: 1, NEGATIVE: 2},
    "nobody": {POSITIVE: 1, NEGATIVE: 2},
    "anonymous": {NEGATIVE: 2},
}


@dataclass(frozen=True)
class Role:
    name: str
    headers: dict[str, str]
    team_b: bool  # sees team B's objects (admins, finance); else team A's are its own


def _roles(world: World) -> list[Role]:
    def token(user: str) -> dict[str, str]:
        return {"Authorization": f"Token {Token.objects.create(user=world.users[user]).key}"}

    return [
        Role("admin", token("admin"), True),
        Role("member", token("member"), False),
        Role("finance-token", {"Authorization": f"Bearer {world.finance_key}"}, True),
        Role("finance", {"Authorization": f"Token {world.finance_drf_key}"}, True),
        Role("lead", token("lead"), False),
        Role("nobody", token("nobody"), False),
        Role("anonymous", {}, False),
    ]


def _own_id(world: World, path: str, team_b: bool) -> int | None:
    """The id of an object of the role's for an operation's `{id}` (None: the path has none)."""
    if "{id}" not in path:
        return None
    prefix = path.removeprefix("/api/").split("/")[0]
    team = world.team_b if team_b else world.team_a
    job = world.job_b if team_b else world.job_a
    flag = world.flag_b if team_b else world.flag_a
    objects = {"jobs": job, "teams": team, "clusters": world.cluster, "job-groups": world.group,
               "gpus": world.gpu_b, "flags": flag, "reports": world.report_b, "when-to-run": team}  # fmt: skip
    return objects[prefix].pk


def test_every_operation_as_every_role_answers_without_a_server_error(settings_debug) -> None:
    # given a fleet with a row in every list, and each role's credentials
    world = world_build()
    decisions.flag_review(actor=world.users["admin"], flag=world.flag_a, action="acknowledge", reason="seen")
    roles = _roles(world)
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", get_wsgi_application(), headers=roles[0].headers
    )
    schema.config.generation.update(codec="utf-8", allow_x00=True)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 27

    for operation in operations:
        endpoint = f"{operation.method.upper()} {operation.path}"
        for role in roles:
            own = _own_id(world, operation.path, role.team_b)
            for mode, examples in EXAMPLES[role.name].items():
                _fuzz(operation, endpoint, role, mode, examples, own)
            if role.name in ("admin", "member"):
                _sweep(operation, endpoint, role, own)


def _sweep(operation: schemathesis.APIOperation, endpoint: str, role: Role, own: int | None) -> None:
    """Each query parameter alone with each odd value of its kind, and odd periods whole."""
    names = _query_names(operation)
    queries = [{name: value} for name in names for value in ODD_BY_PARAMETER.get(name, ODD_TEXT)]
    if {"start", "end"} <= set(names):
        queries += [{"start": start, "end": end} for start, end in ODD_PERIODS]
    ids = {"id": own} if own is not None else None
    for query in queries:
        case = operation.Case(path_parameters=ids, query=query)
        response = case.call(headers=role.headers)
        assert_no_server_error(endpoint, response.status_code, response.content, case)


def _query_names(operation: schemathesis.APIOperation) -> list[str]:
    return [parameter.name for parameter in operation.query]


def _fuzz(
    operation: schemathesis.APIOperation,
    endpoint: str,
    role: Role,
    mode: GenerationMode,
    examples: int,
    own: int | None,
) -> None:
    """`examples` cases of the operation in this mode as this role; half with its own object's id where it has one."""
    ids = {"id": own} if own is not None else None
    odd_query = st.fixed_dictionaries({}, optional={name: ODD_VALUES for name in _query_names(operation)})
    strategy = st.one_of(
        operation.as_strategy(generation_mode=mode),
        operation.as_strategy(generation_mode=mode, path_parameters=ids),
        odd_query.flatmap(lambda query: operation.as_strategy(generation_mode=mode, path_parameters=ids, query=query)),
    )

    @seed(zlib.crc32(f"{endpoint} {role.name} {mode.value}".encode()))
    @given(case=strategy)
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: schemathesis.Case) -> None:
        response = case.call(headers=role.headers)
        assert_no_server_error(endpoint, response.status_code, response.content, case)
        if mode is POSITIVE:  # data the schema allows: the answer conforms to the schema too
            case.validate_response(response, checks=[response_schema_conformance])

    check()
