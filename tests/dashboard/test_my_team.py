"""A team member lands on their team this month ("My team" in the menu); several teams: a choice; admins and
finance land on the fleet page."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from apps.core.access.policy import FINANCE_GROUP
from apps.dashboard.views import month_to_date
from apps.fleet.models import Team, TeamMembership

from .test_fleet_dashboard import _login, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _login_lands(username: str, password: str) -> tuple[str, Client]:
    """Where a login with no `next` ends up, following every redirect."""
    client = Client()
    answer = client.post("/accounts/login/", {"username": username, "password": password}, follow=True)
    assert answer.status_code == 200
    return answer.redirect_chain[-1][0], client


def test_month_to_date_is_this_month_s_first_day_to_tomorrow() -> None:
    now = datetime(2026, 12, 5, 23, 30, tzinfo=UTC)
    assert [d.isoformat() for d in month_to_date(now)] == ["2026-12-01", "2026-12-06"]


def test_a_member_of_one_team_lands_on_it_this_month_and_finds_it_in_the_menu() -> None:
    vision = Team.objects.create(name="vision")
    ada = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=ada, team=vision)
    landed, client = _login_lands("ada", "pw-ada")
    start, end = month_to_date(timezone.now())
    assert landed == f"/teams/{vision.pk}/?start={start.isoformat()}&end={end.isoformat()}"
    page = client.get("/").content.decode()
    assert '<a href="/teams/mine/">My team</a>' in page  # and the fleet page stays theirs to open


def test_a_member_of_several_teams_chooses_one() -> None:
    ada = User.objects.create_user("ada", password="pw-ada")
    for name in ("vision", "nlp"):
        TeamMembership.objects.create(user=ada, team=Team.objects.create(name=name))
    landed, client = _login_lands("ada", "pw-ada")
    assert landed == "/teams/mine/"
    html = client.get("/teams/mine/").content.decode()
    assert html.index(">nlp</a>") < html.index(">vision</a>")
    assert f"?start={month_to_date(timezone.now())[0].isoformat()}" in html


@pytest.mark.parametrize("role", ["admin", "finance", "nobody"])
def test_admins_finance_and_users_in_no_team_land_on_the_fleet_page(role: str) -> None:
    user = User.objects.create_user(role, password="pw", is_staff=role == "admin")
    if role == "finance":
        user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    landed, client = _login_lands(role, "pw")
    assert landed == "/"
    assert "My team" not in client.get("/").content.decode()
    assert client.get("/teams/mine/")["Location"] == "/"


def test_the_bare_home_page_asks_for_a_login_that_lands_where_the_viewer_belongs() -> None:
    assert Client().get("/")["Location"] == "/accounts/login/"
    assert Client().get("/?start=2026-11-01")["Location"] == "/accounts/login/?next=/%3Fstart%3D2026-11-01"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_team_lead_finds_their_team_in_one_click_in_the_browser(live_server, browser) -> None:  # noqa: F811
    vision = Team.objects.create(name="vision", display_name="Vision")
    lin = User.objects.create_user("lin", password="pw-lin")
    TeamMembership.objects.create(user=lin, team=vision, role=TeamMembership.Role.LEAD)
    page = browser.new_page()
    page.goto(f"{live_server.url}/")
    page.fill("#id_username", "lin")
    page.fill("#id_password", "pw-lin")
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert f"/teams/{vision.pk}/?start=" in page.url
    page.goto(f"{live_server.url}/jobs/")
    page.click("header nav >> text=My team")
    assert f"/teams/{vision.pk}/?start=" in page.url
    page.close()
