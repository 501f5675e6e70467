"""A page that is not found or not the viewer's is the site's 404 or 403, with its menu, for every role, with
DEBUG on (as the demo runs) and off; a member asking for an admin's page gets the site's 403, never Django
administration's login; a real error stays a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from tests.api.world import World, world_build

from .test_fleet_dashboard import _login, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

PERIOD = "?start=2026-11-02&end=2026-11-04"
MENU = 'class="top"'  # the site's header, on every page of its layout
ROLES = ("member", "lead", "finance", "admin")


def _pages(w: World) -> list[tuple[str, dict[str, int]]]:
    """Each page, found / not found / not the viewer's, with the status each role gets."""
    everyone, sees_all = dict.fromkeys(ROLES, 200), {"member": 404, "lead": 404, "finance": 200, "admin": 200}
    admins_and_finance = {"member": 403, "lead": 403, "finance": 200, "admin": 200}
    admins = {"member": 403, "lead": 403, "finance": 403, "admin": 200}
    return [
        (f"/{PERIOD}", everyone),
        (f"/teams/{w.team_a.pk}/{PERIOD}", everyone),
        (f"/teams/{w.team_b.pk}/{PERIOD}", sees_all),
        ("/teams/999999/", dict.fromkeys(ROLES, 404)),
        (f"/teams/{w.team_a.pk}/jobs/{PERIOD}", everyone),
        (f"/teams/{w.team_b.pk}/jobs/{PERIOD}", sees_all),
        (f"/jobs/{w.job_a.pk}/", everyone),
        (f"/jobs/{w.job_b.pk}/", sees_all),
        ("/jobs/999999/", dict.fromkeys(ROLES, 404)),
        ("/jobs/slurm/b/", sees_all | {"finance": 302, "admin": 302}),  # to the job's page
        ("/jobs/slurm/no-such-job/", dict.fromkeys(ROLES, 404)),
        (f"/gpus/{w.gpu_b.pk}/{PERIOD}", admins_and_finance),
        ("/gpus/999999/", {"member": 403, "lead": 403, "finance": 404, "admin": 404}),
        ("/status/", admins),
        ("/audit/", admins),
        ("/tokens/", admins_and_finance),
        ("/reports/", everyone),
        (f"/reports/{w.report_b.pk}/", sees_all),
        ("/reports/999999/", dict.fromkeys(ROLES, 404)),
        (f"/reports/preview/?team={w.team_a.pk}&week=2026-11-02", everyone),
        (f"/reports/preview/?team={w.team_b.pk}&week=2026-11-02", sees_all),
        (f"/reports/teams/{w.team_b.pk}/recipients/", {"member": 404, "lead": 404, "finance": 403, "admin": 200}),
        ("/no-such-page/", dict.fromkeys(ROLES, 404)),
    ]


@pytest.fixture
def world() -> World:
    return world_build()


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_every_page_not_found_or_not_yours_is_the_site_s_page_for_every_role(world: World, debug: bool) -> None:
    failures = []
    with override_settings(DEBUG=debug):
        for role in ROLES:
            client = Client(raise_request_exception=False)
            client.force_login(world.users[role])
            for path, expected in _pages(world):
                answer = client.get(path)
                body = answer.content.decode()
                if answer.status_code != expected[role]:
                    failures.append(f"{role} {path}: {answer.status_code}, expected {expected[role]}")
                elif answer.status_code in (403, 404) and (
                    MENU not in body or "Server error" in body or "Django administration" in body
                ):
                    failures.append(f"{role} {path}: {answer.status_code} is not the site's page")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_an_admin_page_sends_the_anonymous_to_the_site_s_login(world: World, debug: bool) -> None:
    with override_settings(DEBUG=debug):
        answer = Client().get("/audit/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next=/audit/")


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_a_real_error_stays_a_server_error(world: World, debug: bool, monkeypatch: Any) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("apps.dashboard.views.render", broken)  # the fleet page fails as it renders
    client = Client(raise_request_exception=False)
    client.force_login(world.users["admin"])
    with override_settings(DEBUG=debug, FLEETWATT_DEBUG_TRACEBACK_PAGES=False):
        answer = client.get(f"/{PERIOD}")
    assert answer.status_code == 500 and "Server error" in answer.content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_member_sees_the_site_s_404_and_403_in_the_browser_with_debug_on(live_server, browser) -> None:  # noqa: F811
    # given the demo's DEBUG, a member of one team
    w = world_build()
    page = browser.new_page()
    with override_settings(DEBUG=True):
        _login(page, live_server.url, "member", "pw-member")
        # when they open another team's job, an admin's page and a team that does not exist
        for path, status, says in [
            (f"/jobs/{w.job_b.pk}/", 404, "Not found"),
            ("/audit/", 403, "for admins"),
            ("/status/", 403, "for admins"),
            ("/teams/999999/", 404, "Not found"),
        ]:
            answer = page.goto(live_server.url + path)
            # then the site's page answers, with its menu, saying why
            assert answer is not None and answer.status == status, (path, answer and answer.status)
            assert page.locator("header.top nav").count() == 1, path
            assert says.lower() in page.inner_text("main").lower(), path
    page.close()
