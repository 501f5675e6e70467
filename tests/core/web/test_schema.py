"""apps.core.web.schema: the OpenAPI schema's post-processing. A property without a description gets the glossary's
(a bare $ref wrapped, so that the description is not ignored), one that describes itself keeps its own; every
operation declares DRF's error body for 400, 401, 403 and 404 without replacing an answer it already declares; a
GET's CSV answer is CSV text and a write declares none. Then the same on the schema the project generates."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from apps.core.access.authentication import ApiTokenAuthentication
from apps.core.web.schema import (
    CSV_SCHEMA,
    ERROR_SCHEMA,
    ERROR_STATUSES,
    FIELD_GLOSSARY,
    ApiTokenScheme,
    declare_errors_and_csv,
    describe_fields,
)

ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _schema() -> dict[str, Any]:
    json_and_csv = {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}, "text/csv": {"schema": {}}}
    return {
        "components": {
            "schemas": {
                "Job": {
                    "properties": {
                        "energy_j": {"type": "number"},
                        "cost": {"type": "string", "description": "Its own words."},
                        "cluster": {"$ref": "#/components/schemas/Cluster"},
                        "mystery": {"type": "string"},
                    }
                }
            }
        },
        "paths": {
            "/api/jobs/": {
                "get": {"responses": {"200": {"content": copy.deepcopy(json_and_csv)}}},
                "post": {"responses": {"201": {"content": copy.deepcopy(json_and_csv)}}},
                "parameters": [{"name": "id"}],  # not an operation: left alone
            },
            "/api/teams/{id}/": {"get": {"responses": {"404": {"description": "No such team."}}}},
        },
    }


def test_a_property_without_a_description_gets_the_glossarys_and_one_with_its_own_keeps_it() -> None:
    result = describe_fields(_schema(), generator=None, request=None, public=True)
    props = result["components"]["schemas"]["Job"]["properties"]
    assert props["energy_j"] == {"type": "number", "description": FIELD_GLOSSARY["energy_j"]}
    assert props["cost"]["description"] == "Its own words."
    assert "description" not in props["mystery"]  # a name the glossary does not know: nothing made up


def test_a_bare_ref_is_wrapped_so_that_its_description_is_read() -> None:
    result = describe_fields(_schema(), generator=None, request=None, public=True)
    cluster = result["components"]["schemas"]["Job"]["properties"]["cluster"]
    assert cluster == {"allOf": [{"$ref": "#/components/schemas/Cluster"}], "description": FIELD_GLOSSARY["cluster"]}


def test_every_operation_declares_the_error_body_and_keeps_what_it_declared() -> None:
    result = declare_errors_and_csv(_schema())
    assert result["components"]["schemas"]["Error"] == ERROR_SCHEMA
    for path, ops in result["paths"].items():
        for method in ("get", "post"):
            if method not in ops:
                continue
            responses = ops[method]["responses"]
            for status in ERROR_STATUSES:
                assert status in responses, (path, method, status)
    teams = result["paths"]["/api/teams/{id}/"]["get"]["responses"]
    assert teams["404"] == {"description": "No such team."}  # its own, not replaced
    assert teams["400"]["content"]["application/json"]["schema"] == ERROR_REF
    assert result["paths"]["/api/jobs/"]["parameters"] == [{"name": "id"}]


def test_a_gets_csv_is_csv_text_and_a_write_answers_json_only() -> None:
    result = declare_errors_and_csv(_schema())
    get = result["paths"]["/api/jobs/"]["get"]["responses"]["200"]["content"]
    post = result["paths"]["/api/jobs/"]["post"]["responses"]["201"]["content"]
    assert get["text/csv"] == {"schema": CSV_SCHEMA} and "application/json" in get
    assert "text/csv" not in post and "application/json" in post


def test_an_empty_schema_gets_the_error_component_and_nothing_else() -> None:
    assert declare_errors_and_csv({}) == {"components": {"schemas": {"Error": ERROR_SCHEMA}}}


def test_the_api_token_is_a_bearer_scheme() -> None:
    scheme = ApiTokenScheme(None).get_security_definition(None)  # type: ignore[arg-type]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer" and "fw_" in scheme["description"]
    assert ApiTokenScheme._matches(ApiTokenAuthentication())  # the class it describes (named by its dotted path)


@pytest.fixture(scope="module")
def generated() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def test_the_projects_schema_declares_the_errors_and_csv_of_every_operation(generated: dict[str, Any]) -> None:
    operations = [
        (path, method, op)
        for path, ops in generated["paths"].items()
        for method, op in ops.items()
        if isinstance(op, dict) and "responses" in op
    ]
    csv_answers = []
    for path, method, op in operations:
        assert ERROR_STATUSES.keys() <= op["responses"].keys(), (path, method)
        for status, response in op["responses"].items():
            csv = response.get("content", {}).get("text/csv")
            if csv is not None:
                assert method == "get" and status.startswith("2") and csv == {"schema": CSV_SCHEMA}, (path, method)
                csv_answers.append(path)
    # the lists answer CSV, and the writes (acknowledge, exclude...) are operations too
    assert "/api/jobs/" in csv_answers and any(method == "post" for _, method, _ in operations)
    assert "apiToken" in generated["components"]["securitySchemes"]
