"""The headers a security review expects, and API tokens that end (issue: no input breaks it): no page or answer had a
Content-Security-Policy, authenticated pages and API answers could be kept by a proxy or the browser, API tokens
never expired, and /api/schema/ and /api/docs/ answered anyone. docs/operations.md, "Headers and tokens"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.access.policy import FINANCE_GROUP
from apps.core.models import ApiToken

pytestmark = pytest.mark.django_db

PRIVATE = "private, no-store"


@pytest.fixture
def finance() -> User:
    user = User.objects.create_user("fin", password="pw-fin")
    user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return user


def _bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_every_answer_carries_the_content_security_policy(client, settings) -> None:
    for response in (client.get("/accounts/login/"), client.get("/api/jobs/"), client.get("/no-such-page/")):
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-eval" not in policy
        assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
        assert response["X-Content-Type-Options"] == "nosniff" and response["Referrer-Policy"] == "same-origin"
        assert response["X-Frame-Options"] == "DENY" and response["Cross-Origin-Opener-Policy"] == "same-origin"
    settings.FLEETWATT_CONTENT_SECURITY_POLICY = ""
    assert "Content-Security-Policy" not in client.get("/accounts/login/")


def test_authenticated_answers_are_private_and_not_stored(finance) -> None:
    # given finance logged in, and a tool with its token
    session = Client()
    session.force_login(finance)
    _, key = ApiToken.issue(user=finance, name="ERP")
    # then its pages and API answers, and the tool's, are not to be kept by anyone
    for response in (
        session.get("/"),
        session.get("/tokens/"),
        session.get("/api/jobs/"),
        _bearer(key).get("/api/jobs/"),
        _bearer(key).get("/api/teams/compare/", {"month": "2026-11"}),
    ):
        assert response.status_code == 200
        assert response["Cache-Control"] == PRIVATE
    # and a refused token's answer neither
    assert _bearer("fw_notakey-at-all").get("/api/jobs/")["Cache-Control"] == PRIVATE
    # while the login page and the static files keep their own
    assert Client().get("/accounts/login/").get("Cache-Control") != PRIVATE
    assert Client().get("/static/css/fleetwatt.css").get("Cache-Control") != PRIVATE


def test_a_new_token_expires_after_the_default_life_unless_another_is_chosen(finance, settings) -> None:
    session = Client()
    session.force_login(finance)
    # when finance makes a token with the page's default, one for 30 days and one that never expires
    page = session.get("/tokens/").content.decode()
    assert '<option value="365" selected>365 days</option>' in page and '<option value="0">never</option>' in page
    before = timezone.now()
    session.post("/tokens/", {"name": "default"})
    session.post("/tokens/", {"name": "short", "days": "30"})
    session.post("/tokens/", {"name": "forever", "days": "0"})
    # then each has the life asked for
    expiry = {t.name: t.expires_at for t in ApiToken.objects.filter(user=finance)}
    assert expiry["forever"] is None
    assert before + timedelta(days=365) <= expiry["default"] <= timezone.now() + timedelta(days=365)
    assert before + timedelta(days=30) <= expiry["short"] <= timezone.now() + timedelta(days=30)
    # and a life that is not a whole number of days up to ten years is refused, nothing made
    for days in ("3651", "-1", "\uff13\uff10", "30\n"):
        assert session.post("/tokens/", {"name": "odd", "days": days}).status_code == 400
    assert not ApiToken.objects.filter(name="odd").exists()
    # and the default follows the setting
    settings.FLEETWATT_API_TOKEN_DAYS = 90
    assert '<option value="90" selected>90 days</option>' in session.get("/tokens/").content.decode()


def test_an_expired_token_is_refused_saying_so_and_one_without_expiry_keeps_working(finance) -> None:
    expired, expired_key = ApiToken.issue(user=finance, name="old", expires_at=timezone.now() - timedelta(minutes=1))
    _, lasting_key = ApiToken.issue(user=finance, name="made before expiries existed")  # expires_at empty
    _, fresh_key = ApiToken.issue(user=finance, name="fresh", expires_at=timezone.now() + timedelta(days=1))
    refused = _bearer(expired_key).get("/api/jobs/")
    assert refused.status_code == 401 and "expired" in refused.json()["detail"]
    assert _bearer(lasting_key).get("/api/jobs/").status_code == 200
    assert _bearer(fresh_key).get("/api/jobs/").status_code == 200
    assert expired not in ApiToken.objects.active()
    session = Client()
    session.force_login(finance)
    assert "<strong>expired</strong>" in session.get("/tokens/").content.decode()


def test_the_schema_and_the_docs_are_behind_login_unless_the_setting_opens_them(finance, settings) -> None:
    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code == 401
    answer = anonymous.get("/api/docs/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next=/api/docs/")
    session = Client()
    session.force_login(finance)
    assert session.get("/api/schema/", {"format": "json"}).status_code == 200
    assert session.get("/api/docs/").status_code == 200
    assert session.get("/api/redoc/")["Location"] == "/api/docs/"  # (Redoc fetched its logo from a CDN)
    docs = session.get("/api/docs/").content.decode()
    assert "<script>" not in docs and "?script=" in docs  # the docs' script comes apart: none inline
    assert session.get("/api/docs/", {"script": ""}).status_code == 200
    _, key = ApiToken.issue(user=finance, name="codegen")
    assert _bearer(key).get("/api/schema/", {"format": "json"}).status_code == 200
    # when the setting opens them
    settings.FLEETWATT_API_DOCS_LOGIN = False
    assert anonymous.get("/api/schema/", {"format": "json"}).status_code == 200
    assert anonymous.get("/api/docs/").status_code == 200
