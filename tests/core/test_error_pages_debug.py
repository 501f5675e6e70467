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
