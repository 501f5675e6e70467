"""The team page's "Power limits" card (frontend/templates/dashboard/_frontier.html): each recurring job group's points
per power limit, the advice with its evidence and the period's saving, the plan of a group that never varied; another
team's runs are not on it; in the browser, the card is shown and its words keep the pages' rules."""

from __future__ import annotations

from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.carbon.models import JobGroup
from apps.fleet.models import Team, TeamMembership
from tests.carbon.fleet_builder import HOUR, T0, fleet_build
from tests.carbon.test_frontier_api import _run, _worked

from .page_words import SHOWN_JS, shown_problems
from .test_fleet_dashboard import ARTIFACTS, _login, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
PERIOD = {"start": "2026-11-01", "end": "2026-12-01"}
ADVICE = (
    "at 500 W instead of 700 W this group's runs used 11 % less energy per step and took 7 % longer "
    "(3 runs at 500 W, 4 at 700 W)"
)


def _section(html: str) -> str:
    start = html.index('<section class="card" id="frontier">')
    return unescape(html[start : html.index("</section>", start)])


def _world():
    fleet = fleet_build(servers=1)
    pretrain = JobGroup.objects.create(name="pretrain", match_kind="name_prefix", match_value="pretrain-")
    _worked(fleet, pretrain)
    steady = JobGroup.objects.create(name="finetune", match_kind="name_prefix", match_value="ft-")
    for k in range(3):
        _run(fleet, steady, key=f"slurm/ft{k}", gpu=fleet.gpus[2], start=T0 + k * HOUR, cap_w=700, s=2.0, j=1200)
    # another team's group, at other limits: not on vision's page
    nlp = Team.objects.create(name="nlp")
    secret = JobGroup.objects.create(name="secret-sweep", match_kind="user", match_value="noam")
    for k in range(3):
        _run(fleet, secret, key=f"slurm/nlp{k}", gpu=fleet.gpus[3], start=T0 + k * HOUR, cap_w=300, s=3, j=900,
             team=nlp)  # fmt: skip
    return fleet


def test_the_team_page_shows_the_frontier_the_advice_and_the_plan() -> None:
    # given
    fleet = _world()
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    # when
    section = _section(client.get(f"/teams/{fleet.team.pk}/", PERIOD).content.decode())
    # then the advice with its evidence, each limit's point, and the period's saving
    assert ADVICE in section
    point = "500 W: 2.140 s per step [2.130 to 2.150], 1,070.0 J (GPU energy) per step [1,067.5 to 1,072.5], 3 runs"
    assert point in section
    assert "600 W: 2.050 s per step" in section and "(on the front)" in section
    assert "0.1 kWh (GPU energy), 0.1 kWh (facility energy), 0.0 kg CO2e, 0.03 EUR" in section
    # the group that never varied: its plan
    assert "every run so far at 700 W: try 700 W, 600 W, 500 W, 400 W" in section
    # nothing of the other team's
    assert "secret-sweep" not in section and "300 W" not in section


def test_a_team_with_no_recurring_group_says_so() -> None:
    fleet = fleet_build(servers=1)
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    client = Client()
    client.force_login(member)
    section = _section(client.get(f"/teams/{fleet.team.pk}/", PERIOD).content.decode())
    assert "No job group of the team's finished runs counts its work." in section


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_frontier_is_on_the_team_page_in_the_browser(live_server, browser) -> None:  # noqa: F811
    # given
    fleet = _world()
    User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=User.objects.get(username="ada"), team=fleet.team)
    # when the member opens the team page
    page = browser.new_page(viewport={"width": 1300, "height": 1300})
    _login(page, live_server.url, "ada", "pw-ada")
    page.goto(f"{live_server.url}/teams/{fleet.team.pk}/?start=2026-11-01&end=2026-12-01")
    # then the advice and the plan are shown
    advice = page.locator("#frontier-groups tr[data-group=pretrain] .frontier-advice")
    advice.scroll_into_view_if_needed()
    assert advice.is_visible() and advice.inner_text() == ADVICE
    plan = page.locator("#frontier-groups tr[data-group=finetune] .frontier-advice").inner_text()
    assert plan.startswith("every run so far at 700 W")
    assert page.locator("#frontier-groups tr[data-group=pretrain] li[data-cap='500']").is_visible()
    # and the page's words keep the rules (grouped thousands, units named, no code names)
    assert shown_problems(page.evaluate(SHOWN_JS)) == []
    page.locator("#frontier").screenshot(path=str(ARTIFACTS / "team-frontier.png"))
