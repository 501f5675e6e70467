"""The demo is not a leak: with DEBUG on (as `make demo` runs it), a bad Host header, a form larger than Django
takes or one with too many fields got Django's technical page (80 KB: the settings, the database's name, user and
host, the Redis URL) without a login; a RequestDataTooBig raised in a view was a 500. Each is now the site's 400
page (JSON under /api/), with DEBUG on as with it off."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from django.test import Client

pytestmark = pytest.mark.django_db

# What Django's technical pages show, and what they must never show a client.
LEAKS = ("DEBUG = True", "Traceback", "DATABASES", "REDIS_URL", "SECRET_KEY", "evil.example", "settings.py")


def _is_the_site_s_400(response, *, reason: str) -> None:
    body = response.content.decode()
    assert response.status_code == 400, response.status_code
    assert "<h1>Bad request</h1>" in body and 'class="top"' in body  # the site's layout
    assert reason in body
    for leak in (*LEAKS, django_settings.DATABASES["default"]["NAME"]):
        assert leak not in body, leak
    assert len(body) < 5000


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/reports/unsubscribe/x/", "/healthz", "/no-such-page/"])
def test_a_bad_host_header_is_the_site_s_400_to_an_anonymous_client(settings, debug: bool, path: str) -> None:
    settings.DEBUG = debug
    response = Client().get(path, HTTP_HOST="evil.example")
    _is_the_site_s_400(response, reason="This site does not answer to that host name.")


def test_the_api_answers_a_bad_host_header_with_json(settings) -> None:
    settings.DEBUG = True
    response = Client().get("/api/jobs/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response.json() == {"detail": "This site does not answer to that host name."}


@pytest.mark.parametrize("debug", [True, False])
def test_a_login_form_too_large_is_the_site_s_400(settings, debug: bool) -> None:
    settings.DEBUG = debug
    body = "username=a&password=" + "x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = Client().post("/accounts/login/", body, content_type="application/x-www-form-urlencoded")
    _is_the_site_s_400(response, reason="The form sent is larger than this site takes.")


@pytest.mark.parametrize("debug", [True, False])
def test_a_login_form_with_too_many_fields_is_the_site_s_400(settings, debug: bool) -> None:
    settings.DEBUG = debug
    body = "&".join(f"f{i}=1" for i in range(1100))
    response = Client().post("/accounts/login/", body, content_type="application/x-www-form-urlencoded")
    _is_the_site_s_400(response, reason="The form sent has more fields than this site takes.")


@pytest.mark.parametrize("debug", [True, False])
def test_request_data_too_big_raised_in_a_view_is_a_400(admin_client, settings, monkeypatch, debug: bool) -> None:
    settings.DEBUG = debug

    def too_big(*args: object, **kwargs: object) -> None:
        raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")

    monkeypatch.setattr("apps.dashboard.views.render", too_big)
    _is_the_site_s_400(admin_client.get("/"), reason="The form sent is larger than this site takes.")


def test_client_errors_raised_in_a_view_keep_their_status_with_debug_on(admin_client, settings) -> None:
    """The DEBUG-on error page answered every exception a view raised with a 500, a missing job's Http404 too."""
    settings.DEBUG = True
    missing = admin_client.get("/jobs/999999/")
    assert missing.status_code == 404 and "URLconf" not in missing.content.decode()
    member = Client()
    member.force_login(User.objects.create_user("plain"))
    assert member.get("/status/").status_code == 403  # the admins' page
