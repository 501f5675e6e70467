"""Who sees what: an access matrix over two teams and the four roles, named API tokens, deploy checks."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from apps.core.models import ApiToken
from apps.fleet.models import Team, TeamMembership
from apps.pipeline.inputs import footprints_recompute
from apps.waste.models import Flag
from tests.carbon.fleet_builder import fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    team_a = fleet.team  # vision
    team_b = Team.objects.create(name="nlp")
    job_a = job_run(fleet, key="slurm/a", gpus=fleet.gpus[:1], hours=2, power_w=500)
    job_b = job_run(fleet, key="slurm/b", gpus=fleet.gpus[1:2], hours=2, power_w=500)
    job_b.team = team_b
    job_b.save()
    footprints_recompute()
    flag_b = Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=job_b)
    users = {
        "member": User.objects.create_user("member"),
        "lead": User.objects.create_user("lead"),
        "finance": User.objects.create_user("finance"),
        "admin": User.objects.create_user("admin", is_staff=True),
    }
    TeamMembership.objects.create(user=users["member"], team=team_a, role="member")
    TeamMembership.objects.create(user=users["lead"], team=team_a, role="lead")
    users["finance"].groups.add(Group.objects.create(name="finance"))
    ids = {"team_a": team_a.pk, "team_b": team_b.pk, "job_a": job_a.pk, "job_b": job_b.pk, "flag_b": flag_b.pk,
           "cluster": fleet.cluster.pk}  # fmt: skip
    return users, ids


P = "?start=2026-11-02&end=2026-11-03"
# (method, path, {role: expected status}); anonymous is refused everywhere.
MATRIX = [
    ("get", "/api/jobs/{job_a}/", {"member": 200, "lead": 200, "finance": 200, "admin": 200}),
    ("get", "/api/jobs/{job_b}/", {"member": 404, "lead": 404, "finance": 200, "admin": 200}),
    ("get", "/api/teams/{team_a}/rollup/" + P, {"member": 200, "lead": 200, "finance": 200, "admin": 200}),
    ("get", "/api/teams/{team_b}/rollup/" + P, {"member": 404, "lead": 404, "finance": 200, "admin": 200}),
    ("get", "/api/clusters/", {"member": 403, "lead": 403, "finance": 200, "admin": 200}),
    ("get", "/api/clusters/{cluster}/rollup/" + P, {"member": 403, "lead": 403, "finance": 200, "admin": 200}),
    ("get", "/api/flags/{flag_b}/", {"member": 404, "lead": 404, "finance": 200, "admin": 200}),
    ("post", "/api/flags/{flag_b}/acknowledge/", {"member": 404, "lead": 404, "finance": 403, "admin": 201}),
    ("post", "/api/jobs/{job_b}/exclude/", {"member": 403, "lead": 403, "finance": 403, "admin": 201}),
    ("get", "/api/audit-log/", {"member": 403, "lead": 403, "finance": 200, "admin": 200}),
    ("get", "/api/gpus/", {"member": 403, "lead": 403, "finance": 200, "admin": 200}),
    ("get", "/teams/{team_b}/" + P, {"member": 404, "lead": 404, "finance": 200, "admin": 200}),
    ("get", "/jobs/{job_b}/", {"member": 404, "lead": 404, "finance": 200, "admin": 200}),
    ("get", "/audit/", {"member": 403, "lead": 403, "finance": 403, "admin": 200}),
    ("get", "/tokens/", {"member": 403, "lead": 403, "finance": 200, "admin": 200}),
]


@pytest.mark.parametrize(("method", "path", "expected"), MATRIX, ids=[f"{m} {p}" for m, p, _ in MATRIX])
def test_access_matrix(world, method: str, path: str, expected: dict[str, int]) -> None:
    users, ids = world
    url = path.format(**ids)
    anonymous = getattr(Client(), method)(url)
    assert anonymous.status_code in (302, 401, 403)
    for role, status in expected.items():
        client = Client()
        client.force_login(users[role])
        body = {"reason": "matrix"} if method == "post" else None
        response = getattr(client, method)(url, body) if body else getattr(client, method)(url)
        assert response.status_code == status, (role, url, response.status_code)


def test_member_lists_only_the_team_jobs(world) -> None:
    users, ids = world
    client = APIClient()
    client.force_authenticate(users["member"])
    assert [j["id"] for j in client.get("/api/jobs/").json()["results"]] == [ids["job_a"]]
    assert [t["name"] for t in client.get("/api/teams/").json()["results"]] == ["vision"]


def test_named_api_tokens_are_hashed_read_only_revocable_and_record_their_use(world) -> None:
    users, ids = world
    token, key = ApiToken.issue(user=users["finance"], name="ERP export")
    assert key not in str(ApiToken.objects.filter(pk=token.pk).values().get())  # only its hash is kept
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert len(client.get("/api/jobs/").json()["results"]) == 2
    token.refresh_from_db()
    assert token.last_used_at is not None
    assert client.post(f"/api/jobs/{ids['job_b']}/exclude/", {"reason": "x"}).status_code == 403
    token.revoked_at = token.created_at
    token.save()
    assert client.get("/api/jobs/").status_code == 401
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION=f"Bearer {key[:-2]}xx")
    assert wrong.get("/api/jobs/").status_code == 401


def test_tokens_are_created_and_shown_once_in_the_app(world) -> None:
    users, _ = world
    client = Client()
    client.force_login(users["finance"])
    page = client.post("/tokens/", {"name": "BI tool"})
    key = page.context["new_key"]
    assert key.startswith("fw_") and key.encode() in page.content
    assert key.encode() not in client.get("/tokens/").content


def test_tokens_are_throttled_per_token(world, settings) -> None:
    from django.core.cache import cache

    from apps.core.access.authentication import ApiTokenRateThrottle

    cache.clear()
    users, _ = world
    _, key = ApiToken.issue(user=users["finance"], name="busy")
    _, other = ApiToken.issue(user=users["finance"], name="quiet")
    ApiTokenRateThrottle.THROTTLE_RATES = {"api_token": "3/min"}
    try:
        busy = APIClient()
        busy.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        codes = [busy.get("/api/gpus/").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        quiet = APIClient()
        quiet.credentials(HTTP_AUTHORIZATION=f"Bearer {other}")
        assert quiet.get("/api/gpus/").status_code == 200
    finally:
        ApiTokenRateThrottle.THROTTLE_RATES = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
        cache.clear()


def test_list_endpoints_cap_page_size(world) -> None:
    users, _ = world
    client = APIClient()
    client.force_authenticate(users["admin"])
    for path in ("/api/jobs/", "/api/flags/", "/api/gpus/", "/api/audit-log/"):
        assert client.get(path, {"page_size": 1000}).status_code == 200
        for beyond in (1001, 0, -1, "ten"):
            refused = client.get(path, {"page_size": beyond})
            assert refused.status_code == 400 and "page_size" in refused.json(), (path, beyond)
    assert client.get("/api/jobs/", {"start": "2020-01-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"}).status_code == 400


def test_production_settings_pass_check_deploy() -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
        "DJANGO_SETTINGS_MODULE": "fleetwatt.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "fleetwatt.example.org",
        "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
