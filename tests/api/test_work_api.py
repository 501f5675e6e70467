"""`/api/work/`: who may read it, what it refuses, and the number of queries it takes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.fleet.models import Cluster, Gpu, Team, TeamMembership
from apps.jobs.models import JobWorkHour
from apps.pipeline.inputs import footprints_recompute
from tests.carbon.fleet_builder import HOUR, T0, Fleet, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db
PERIOD = {"start": "2026-11-02", "end": "2026-11-03"}


@pytest.fixture
def world():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    mine = job_run(fleet, key="k8s/search/llama-0", gpus=fleet.gpus[:1], hours=2, power_w=500)
    theirs = job_run(fleet, key="k8s/ads/mistral-0", gpus=fleet.gpus[1:2], hours=2, power_w=400)
    theirs.team = Team.objects.create(name="ads")
    theirs.save()
    for job, model in ((mine, "llama"), (theirs, "mistral")):
        for h in range(2):
            JobWorkHour.objects.create(
                job=job, hour=T0 + h * HOUR, engine="vllm", model=model, output_tokens=1e6, requests=4000
            )
    footprints_recompute()
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    return member


def _client(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def test_anonymous_is_refused(world) -> None:
    assert _client(None).get("/api/work/", PERIOD).status_code in (401, 403)


def test_a_member_sees_their_team_s_work_only(world) -> None:
    lines = _client(world).get("/api/work/", PERIOD).json()
    assert [(line["name"], line["output_tokens"]) for line in lines] == [("llama", 2e6)]
    assert lines[0]["energy_j_per_1k_tokens"] == pytest.approx(500 * 3600 * 2 / 2e6 * 1000)
    assert _client(world).get("/api/work/", {**PERIOD, "team": "ads"}).json() == []


def test_admins_see_every_team_and_filter_by_team_and_cluster(world) -> None:
    admin = _client(User.objects.create_user("root", is_staff=True))
    assert {line["name"] for line in admin.get("/api/work/", PERIOD).json()} == {"llama", "mistral"}
    (ads,) = admin.get("/api/work/", {**PERIOD, "team": "ads", "group_by": "team"}).json()
    assert ads["name"] == "ads" and ads["requests"] == 8000
    assert admin.get("/api/work/", {**PERIOD, "cluster": "nowhere"}).json() == []


@pytest.mark.parametrize(
    "query",
    [
        {},  # no period
        {**PERIOD, "group_by": "user"},
        {**PERIOD, "colour": "red"},
        {"start": "2026-11-03", "end": "2026-11-02"},
    ],
)
def test_bad_queries_are_a_clear_400(world, query: dict) -> None:
    answer = _client(world).get("/api/work/", query)
    assert answer.status_code == 400 and answer.json()


def _queries(client: APIClient) -> int:
    cache.clear()  # (the answer is kept: ask it afresh)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/work/", {**PERIOD, "format": "csv"}).status_code == 200
    return len(queries)


def test_its_queries_do_not_grow_with_jobs(world) -> None:
    admin = _client(User.objects.create_user("root", is_staff=True))
    before = _queries(admin)
    fleet = Cluster.objects.get()
    for i, gpu in enumerate(Gpu.objects.filter(node__cluster=fleet)[2:6]):
        job = job_run(Fleet(fleet, [], Team.objects.get(name="vision")), key=f"k8s/search/p{i}", gpus=[gpu], hours=1,
                      power_w=300)  # fmt: skip
        JobWorkHour.objects.create(job=job, hour=T0, engine="vllm", model=f"m{i}", output_tokens=5e5)
    assert _queries(admin) == before <= 8
