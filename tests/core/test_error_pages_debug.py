"""With DEBUG on (the demo), a page that does not exist is the site's 404 page, never Django's list of every
URL pattern; the API still answers JSON."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_a_missing_page_is_the_site_s_404_with_debug_on(admin_client, settings) -> None:
    settings.DEBUG = True
    page = admin_client.get("/no-such-page/")
    body = page.content.decode()
    assert page.status_code == 404
    assert "DEBUG = True" not in body and "URLconf" not in body
    assert "fleetwatt" in body and "<nav" in body  # the site's layout


def test_a_missing_job_is_the_site_s_404_and_the_api_answers_json(admin_client, settings) -> None:
    settings.DEBUG = True
    assert "URLconf" not in admin_client.get("/jobs/999999/").content.decode()
    answer = admin_client.get("/api/no-such-endpoint/")
    assert answer.status_code == 404 and answer.json() == {"detail": "Not found."}


def test_an_error_is_the_site_s_500_page_with_debug_on_and_the_traceback_is_logged(
    admin_client, settings, monkeypatch, caplog
) -> None:
    # given DEBUG on, and a page whose view fails
    settings.DEBUG = True

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a template's bug")

    monkeypatch.setattr("apps.dashboard.views.render", broken)
    # when it is opened
    page = admin_client.get("/")
    # then it is the site's 500 page, not Django's traceback page, and the traceback is in the log
    body = page.content.decode()
    assert page.status_code == 500
    assert "Server error" in body and 'class="top"' in body
    assert "Traceback" not in body and "a template&#x27;s bug" not in body and "a template's bug" not in body
    assert any(r.exc_info and "a template's bug" in str(r.exc_info[1]) for r in caplog.records)
    # unless a developer asked for Django's traceback page
    settings.FLEETWATT_DEBUG_TRACEBACK_PAGES = True
    with pytest.raises(RuntimeError):  # the test client re-raises what Django's traceback page would show
        admin_client.get("/")
