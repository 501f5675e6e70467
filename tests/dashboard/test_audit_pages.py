"""The audit queue and the job page: admins decide from the page, every decision shows in the trail."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.fleet.models import Team, TeamMembership
from apps.pipeline.inputs import footprints_recompute
from apps.waste.models import AuditEntry, Flag
from tests.carbon.fleet_builder import fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    job = job_run(fleet, key="slurm/hog", gpus=fleet.gpus[:1], hours=3, power_w=80)
    footprints_recompute()
    flag = Flag.objects.create(
        kind="memory_hog", cluster=fleet.cluster, job=job, evidence={"gpu_hours_blocked": 3.0, "cost": "8.40"}
    )
    admin = User.objects.create_user("boss", password="pw", is_staff=True)
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=fleet.team)
    return fleet, job, flag, admin, member


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admin_sees_the_queue_and_decides_from_it(world) -> None:
    fleet, job, flag, admin, member = world
    client = _login(admin)
    page = client.get("/audit/", {"kind": "memory_hog"})
    assert page.status_code == 200 and b"slurm/hog" in page.content and b"3.0 GPU-h blocked" in page.content
    refused = client.post(f"/audit/{flag.pk}/act/", {"action": "exclude", "reason": ""}, follow=True)
    assert b"A reason is required" in refused.content and not AuditEntry.objects.exists()
    client.post(f"/audit/{flag.pk}/act/", {"action": "exclude", "reason": "a benchmark"})
    job.refresh_from_db()
    assert job.excluded_from_bill and AuditEntry.objects.count() == 1
    Team.objects.create(name="nlp")
    client.post(f"/audit/{flag.pk}/act/", {"action": "reassign_team", "team": "nlp", "reason": "their notebook"})
    job.refresh_from_db()
    assert job.team.name == "nlp" and AuditEntry.objects.count() == 2
    trail = client.get(f"/jobs/{job.pk}/")
    assert trail.status_code == 200
    assert b"a benchmark" in trail.content and b"their notebook" in trail.content and b"TDP estimate" in trail.content


def test_members_cannot_use_the_queue_nor_open_other_teams_jobs(world) -> None:
    fleet, job, flag, admin, member = world
    client = _login(member)
    assert client.get("/audit/").status_code == 403  # the site's 403, not the admin's login
    assert client.post(f"/audit/{flag.pk}/act/", {"action": "acknowledge", "reason": "mine"}).status_code == 403
    assert not AuditEntry.objects.exists()
    assert client.get(f"/jobs/{job.pk}/").status_code == 200
    other = fleet_build(name="c2", servers=1)
    stranger_team = Team.objects.create(name="bio")
    stranger = job_run(other, key="slurm/x", gpus=other.gpus[:1], hours=1, power_w=100)
    stranger.team = stranger_team
    stranger.save()
    assert client.get(f"/jobs/{stranger.pk}/").status_code == 404


def test_fleet_overview_for_admins_and_the_gpu_page(world) -> None:
    fleet, job, flag, admin, member = world
    admin_page = _login(admin).get("/", {"start": "2026-11-02", "end": "2026-11-03"})
    assert b"Clusters: use and the idle line" in admin_page.content and b"teams-chart" in admin_page.content
    member_page = _login(member).get("/", {"start": "2026-11-02", "end": "2026-11-03"})
    assert b"Clusters: use and the idle line" not in member_page.content
    gpu = fleet.gpus[0]
    page = _login(admin).get(f"/gpus/{gpu.pk}/", {"start": "2026-11-02", "end": "2026-11-03"})
    assert page.status_code == 200 and b"slurm/hog" in page.content
    assert _login(member).get(f"/gpus/{gpu.pk}/").status_code == 403


def test_admin_decides_from_the_job_page(world) -> None:
    fleet, job, flag, admin, member = world
    client = _login(admin)
    client.post(f"/audit/jobs/{job.pk}/act/", {"action": "exclude", "reason": "load test"})
    job.refresh_from_db()
    assert job.excluded_from_bill and AuditEntry.objects.get().flag_id is None
    assert b"load test" in client.get(f"/jobs/{job.pk}/").content
    assert _login(member).post(f"/audit/jobs/{job.pk}/act/", {"action": "include", "reason": "x"}).status_code == 403
    job.refresh_from_db()
    assert job.excluded_from_bill
