"""Finance could write: a finance user's session, DRF token or named API token reported any team's job's work
(`POST /api/jobs/{id}/work/` answered 200). Finance is read-only everywhere; a job's work is reported by its
own team's members and by admins."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.fleet.models import TeamMembership
from apps.jobs.models import Job
from tests.api.world import World, world_build

pytestmark = pytest.mark.django_db
WORK = {"work_units": 1000, "work_unit": "request"}


@pytest.fixture
def world() -> World:
    return world_build()


def _finance_clients(world: World) -> dict[str, Client]:
    session = APIClient()
    session.force_login(world.users["finance"])
    drf_token = APIClient()
    drf_token.credentials(HTTP_AUTHORIZATION=f"Token {world.finance_drf_key}")
    named = APIClient()
    named.credentials(HTTP_AUTHORIZATION=f"Bearer {world.finance_key}")
    return {"session": session, "drf token": drf_token, "named token": named}


def _work_units(job: Job) -> float | None:
    return Job.objects.values_list("work_units", flat=True).get(pk=job.pk)


def test_finance_cannot_report_any_job_work_whatever_its_credentials(world: World) -> None:
    # given finance, and finance who is also a member of job A's team
    TeamMembership.objects.create(user=world.users["finance"], team=world.team_a, role="lead")
    for how, client in _finance_clients(world).items():
        for job in (world.job_a, world.job_b):
            # when finance reports the job's work
            response = client.post(f"/api/jobs/{job.pk}/work/", WORK, format="json")
            # then refused, and nothing written
            assert response.status_code == 403, (how, job.job_key, response.status_code)
            assert _work_units(job) is None, (how, job.job_key)


def test_finance_is_refused_every_unsafe_method_of_the_api(world: World) -> None:
    client = APIClient()
    client.force_login(world.users["finance"])
    for url in (
        f"/api/jobs/{world.job_b.pk}/work/",
        f"/api/jobs/{world.job_b.pk}/",
        "/api/jobs/",
        f"/api/flags/{world.flag_b.pk}/acknowledge/",
        f"/api/jobs/{world.job_b.pk}/exclude/",
        f"/api/teams/{world.team_b.pk}/",
        "/api/gpus/",
        f"/api/reports/{world.report_b.pk}/",
    ):
        for method in ("post", "put", "patch", "delete"):
            response = getattr(client, method)(url, {"reason": "x", **WORK}, format="json")
            assert response.status_code == 403, (method, url, response.status_code)


def test_a_job_team_members_and_admins_report_its_work_and_no_one_else(world: World) -> None:
    def post(role: str, job: Job) -> int:
        client = APIClient()
        client.force_login(world.users[role])
        return client.post(f"/api/jobs/{job.pk}/work/", WORK, format="json").status_code

    assert post("member", world.job_b) == 404  # another team's job
    assert post("nobody", world.job_b) == 404
    assert _work_units(world.job_b) is None
    assert post("member", world.job_a) == 200
    assert post("lead", world.job_a) == 200
    assert post("admin", world.job_b) == 200
    assert _work_units(world.job_b) == 1000
