"""/api/jobs/: the scheduler's fields of a job and the filters on them (apps.schedulers fills them)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.jobs.states import STATES
from tests.factories import AdminFactory, ClusterFactory, JobFactory, TeamFactory, TeamMembershipFactory

pytestmark = pytest.mark.django_db

SCHEDULER_FIELDS = {
    "state",
    "exit_code",
    "signal",
    "partition",
    "qos",
    "display_id",
    "gpus_requested",
    "gpus_allocated",
}


@pytest.fixture
def world() -> dict[str, Any]:
    cluster = ClusterFactory()
    mine, theirs = TeamFactory(name="vision"), TeamFactory(name="nlp")
    jobs = {
        "failed": JobFactory(
            cluster=cluster, team=mine, job_id="41", user="ada", account="vision", state="failed", exit_code=3,
            signal=0, partition="gpu", qos="normal", display_id="41", gpus_requested=2, gpus_allocated=2,
        ),
        "array": JobFactory(
            cluster=cluster, team=mine, job_id="43", user="bo", account="vision", state="completed", exit_code=0,
            signal=0, partition="debug", display_id="42_1", gpus_requested=1, gpus_allocated=1,
        ),
        "unknown": JobFactory(cluster=cluster, team=mine, job_id="44", user="ada", account="vision-b"),
        "theirs": JobFactory(
            cluster=cluster, team=theirs, job_id="45", user="cy", account="nlp", state="failed", partition="gpu"
        ),
    }  # fmt: skip
    member = TeamMembershipFactory(team=mine).user
    return {"jobs": jobs, "member": member, "admin": AdminFactory()}


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _ids(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    return {row["job_id"] for row in response.json()["results"]}


def test_anonymous_is_refused(world: dict[str, Any]) -> None:
    assert APIClient().get("/api/jobs/", {"state": "failed"}).status_code == 401


def test_the_scheduler_s_fields_are_listed(world: dict[str, Any]) -> None:
    rows = {r["job_id"]: r for r in _client(world["admin"]).get("/api/jobs/").json()["results"]}
    assert rows["41"].keys() >= SCHEDULER_FIELDS
    assert {k: rows["41"][k] for k in SCHEDULER_FIELDS} == {
        "state": "failed", "exit_code": 3, "signal": 0, "partition": "gpu", "qos": "normal", "display_id": "41",
        "gpus_requested": 2, "gpus_allocated": 2,
    }  # fmt: skip
    assert rows["43"]["display_id"] == "42_1"
    # a job no scheduler record describes
    assert (rows["44"]["state"], rows["44"]["exit_code"], rows["44"]["gpus_allocated"]) == ("unknown", None, None)


@pytest.mark.parametrize(
    ("query", "admin_sees", "member_sees"),
    [
        ({"state": "failed"}, {"41", "45"}, {"41"}),
        ({"state": "unknown"}, {"44"}, {"44"}),
        ({"partition": "gpu"}, {"41", "45"}, {"41"}),
        ({"account": "vision"}, {"41", "43"}, {"41", "43"}),
        ({"user": "ada"}, {"41", "44"}, {"41", "44"}),
        ({"job_id": "45"}, {"45"}, set()),  # another team's job is not found
        ({"state": "failed", "partition": "gpu", "user": "ada"}, {"41"}, {"41"}),
    ],
)
def test_filters(world: dict[str, Any], query: dict[str, str], admin_sees: set[str], member_sees: set[str]) -> None:
    assert _ids(_client(world["admin"]).get("/api/jobs/", query)) == admin_sees
    assert _ids(_client(world["member"]).get("/api/jobs/", query)) == member_sees


def test_an_unknown_state_is_a_bad_request(world: dict[str, Any]) -> None:
    response = _client(world["admin"]).get("/api/jobs/", {"state": "bogus"})
    assert response.status_code == 400
    assert "state" in response.json()
    assert all(_client(world["admin"]).get("/api/jobs/", {"state": s}).status_code == 200 for s in STATES)


def test_the_schema_describes_the_state_filter(world: dict[str, Any]) -> None:
    schema = _client(world["admin"]).get("/api/schema/", {"format": "json"}).json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/jobs/"]["get"]["parameters"]}
    assert set(parameters["state"]["schema"]["enum"]) == set(STATES)
    assert {"job_id", "user", "partition", "account"} <= parameters.keys()
    job = schema["components"]["schemas"]["Job"]["properties"]
    assert "(count)" in job["gpus_allocated"]["description"] and "failed:" in job["state"]["description"]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_an_unknown_query_parameter_is_a_400_naming_it(fmt: str) -> None:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    answer = client.get("/api/jobs/", {"stat": "failed", "format": fmt})  # a typo of `state`
    assert answer.status_code == 400
    assert "Unknown query parameter: stat" in answer.content.decode()
    assert client.get("/api/jobs/", {"state": "failed", "page_size": 5, "format": fmt}).status_code == 200
