"""Two faults of the audit's details: an admin could exclude (or reassign) job A citing a finding of job B,
and the audit entry named a finding that is not the job's; and the audit form's `next=` redirected off-site
(`next=https://evil.example/`)."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.waste.models import AuditEntry
from tests.api.world import World, world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> World:
    return world_build()


def _admin(world: World) -> APIClient:
    client = APIClient()
    client.force_login(world.users["admin"])
    return client


@pytest.mark.parametrize(
    ("action", "body"),
    [("exclude", {"reason": "a benchmark"}), ("reassign", {"reason": "their notebook", "team": "nlp"})],
)
def test_a_decision_on_a_job_cannot_cite_another_job_finding(world: World, action: str, body: dict) -> None:
    # when an admin acts on job A citing job B's finding
    response = _admin(world).post(f"/api/jobs/{world.job_a.pk}/{action}/", {**body, "flag": world.flag_b.pk})
    # then refused with the reason, and nothing written
    assert response.status_code == 400, response.content
    assert "finding" in str(response.json()).lower()
    assert not AuditEntry.objects.exists()
    job = Job.objects.get(pk=world.job_a.pk)
    assert not job.excluded_from_bill and job.team_id == world.team_a.pk


def test_a_decision_citing_the_job_own_finding_is_recorded(world: World) -> None:
    response = _admin(world).post(
        f"/api/jobs/{world.job_a.pk}/exclude/", {"reason": "a benchmark", "flag": world.flag_a.pk}
    )
    assert response.status_code == 201
    assert AuditEntry.objects.get().flag_id == world.flag_a.pk


@pytest.mark.parametrize(
    "next_url", ["https://evil.example/", "//evil.example/", "/\\evil.example", "https:///evil.example", " //evil"]
)
def test_the_audit_form_redirects_only_within_the_site(world: World, next_url: str) -> None:
    client = Client()
    client.force_login(world.users["admin"])
    response = client.post(
        f"/audit/{world.flag_a.pk}/act/", {"action": "acknowledge", "reason": "expected", "next": next_url}
    )
    assert response.status_code == 302
    assert response["Location"] == "/audit/", response["Location"]
    assert AuditEntry.objects.count() == 1  # the decision itself is taken


def test_the_audit_form_keeps_a_next_page_of_the_site(world: World) -> None:
    client = Client()
    client.force_login(world.users["admin"])
    response = client.post(
        f"/audit/{world.flag_a.pk}/act/", {"action": "acknowledge", "reason": "ok", "next": "/audit/?kind=memory_hog"}
    )
    assert response["Location"] == "/audit/?kind=memory_hog"
