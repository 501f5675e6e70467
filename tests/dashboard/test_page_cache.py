"""The dashboard's pages kept rendered (apps.dashboard.page_cache): a page asked again is answered as it was made,
without being made again; every change of what it shows (an admin's edit or decision, an ingest) makes it again;
each viewer has their own, and one who may no longer see it is refused; the forms carry the asker's own CSRF token; a
page with a message to show once is never kept; during an ingest the page made before it is answered, and once the
ingest is done the pages asked for lately are made again before they are asked."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection, transaction
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from apps.core.kept import PAGES_ASKED_KEY, data_changed, data_generation, ingest_started, kept_write, making_key
from apps.dashboard import page_cache
from apps.fleet.models import Team, TeamMembership
from apps.rollups.documents import asked_prepare
from apps.waste.models import Flag

from .team_home_world import PERIOD, TeamHomeWorld, team_home_world_build

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[TeamHomeWorld]:
    with django_db_blocker.unblock(), transaction.atomic():
        yield team_home_world_build()
        transaction.set_rollback(True)


@pytest.fixture(autouse=True)
def _pages_kept(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.FLEETWATT_PAGE_CACHE_S = 300
    monkeypatch.setattr(page_cache, "_hour", lambda: "2026-11-04T10")  # (a test never straddles two hours)
    monkeypatch.setattr(page_cache, "_recorded", {})  # (each test's asks are recorded: its cache starts empty)


def _client(user: User, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def _team_url(world: TeamHomeWorld) -> str:
    return f"/teams/{world.vision.pk}/"


def _made(client: Client, url: str, query: dict[str, str] | None = None) -> tuple[str, int]:
    """The page's HTML and the queries answering it took."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, query or {})
    assert response.status_code == 200
    return response.content.decode(), len(queries.captured_queries)


def test_a_page_asked_again_is_answered_as_it_was_made_without_making_it(world: TeamHomeWorld) -> None:
    client = _client(world.lead)
    # given the team's page made once
    first, made = _made(client, _team_url(world), PERIOD)
    # when the lead asks for it again
    again, answered = _made(client, _team_url(world), PERIOD)
    # then the same page, read from the cache: no query but the session's user
    assert made > 10 and answered <= 2
    assert TOKEN.sub("", again) == TOKEN.sub("", first)
    # and another period is another page
    _, other = _made(client, _team_url(world), {"start": "2026-11-02", "end": "2026-11-03"})
    assert other > 10


def test_an_admin_s_edit_is_seen_at_the_next_ask(world: TeamHomeWorld) -> None:
    client = _client(world.lead)
    before, _ = _made(client, _team_url(world), PERIOD)
    assert "<h1>Vision</h1>" in before
    # when an admin renames the team (a save moves the data's generation on)
    world.vision.display_name = "Vision lab"
    world.vision.save()
    # then the next ask makes the page again, with the new name
    after, made = _made(client, _team_url(world), PERIOD)
    assert "<h1>Vision lab</h1>" in after and made > 10


def test_an_admin_s_decision_is_seen_at_the_next_ask(world: TeamHomeWorld) -> None:
    admin = User.objects.create_user("boss", password="pw", is_staff=True)
    client = _client(admin, enforce_csrf_checks=True)
    flag = Flag.objects.filter(job=world.jobs["slurm/1"], status=Flag.Status.OPEN).order_by("pk").first()
    assert flag is not None
    queue = {**PERIOD, "status": ""}
    # given the audit queue made once, then answered from the cache
    client.get("/audit/", queue)
    kept, answered = _made(client, "/audit/", queue)
    assert answered <= 2
    # when the admin acknowledges the finding with the form of the kept page (its token is the admin's own)
    token = TOKEN.search(kept)
    assert token is not None
    response = client.post(
        f"/audit/{flag.pk}/act/",
        {"action": "acknowledge", "reason": "a debugging session", "csrfmiddlewaretoken": token.group(1)},
    )
    # then the decision is taken, its message shown once, and the queue made again shows it decided
    assert response.status_code == 302
    flag.refresh_from_db()
    assert flag.status == Flag.Status.ACKNOWLEDGED
    with_message = client.get(response["Location"]).content.decode()
    assert "acknowledge recorded" in with_message
    after, made = _made(client, "/audit/", queue)
    assert made > 5 and "acknowledge recorded" not in after
    assert "a debugging session" in after


def test_a_page_being_made_is_waited_for_not_made_twice(world: TeamHomeWorld) -> None:
    client = _client(world.lead)
    _made(client, _team_url(world), PERIOD)
    data_changed()  # an edit: the page is to be made again
    # given another request making the page (its mark), which keeps it a moment later
    request = RequestFactory().get(_team_url(world), PERIOD)
    request.user = world.lead
    key, generation = page_cache.page_key(request), data_generation()
    assert key is not None
    cache.add(making_key(key, generation), 1, timeout=30)
    page = (b"<p>made by the other request</p>", "text/html; charset=utf-8")
    threading.Timer(0.3, lambda: kept_write(key, generation, page, 60)).start()
    # when the lead asks for it meanwhile
    with CaptureQueriesContext(connection) as queries:
        response = client.get(_team_url(world), PERIOD)
    # then the page the other request made, not one made again
    assert response.content == page[0] and len(queries.captured_queries) <= 2


def test_each_viewer_has_their_own_page(world: TeamHomeWorld) -> None:
    lead, finance = _client(world.lead), _client(world.finance)
    # when the lead, then finance, ask for the team's page
    mine, _ = _made(lead, _team_url(world), PERIOD)
    theirs, made = _made(finance, _team_url(world), PERIOD)
    # then finance's is made for finance, and names them
    assert made > 10
    assert f"Log out {world.finance.username}" in theirs and f"Log out {world.lead.username}" in mine


def test_a_member_who_left_the_team_no_longer_reads_its_kept_page(world: TeamHomeWorld) -> None:
    client = _client(world.lead)
    _made(client, _team_url(world), PERIOD)
    # when the lead leaves the team (nothing the page shows changed)
    TeamMembership.objects.filter(user=world.lead, team=world.vision).delete()
    # then the team's page is refused
    assert client.get(_team_url(world), PERIOD).status_code == 404


def test_without_the_setting_no_page_is_kept(world: TeamHomeWorld, settings: Any) -> None:
    settings.FLEETWATT_PAGE_CACHE_S = 0
    client = _client(world.lead)
    _made(client, _team_url(world), PERIOD)
    _, made = _made(client, _team_url(world), PERIOD)
    assert made > 10


def test_during_an_ingest_the_page_made_before_is_answered_then_made_again_before_it_is_asked(
    world: TeamHomeWorld,
) -> None:
    client = _client(world.lead)
    _made(client, _team_url(world), PERIOD)
    # when an ingest starts and writes (here: the team's name changes with it)
    ingest_started()
    Team.objects.filter(pk=world.vision.pk).update(display_name="Vision (new)")
    data_changed(by_ingest=True)
    # then while it is in progress, the page made before it
    during, answered = _made(client, _team_url(world), PERIOD)
    assert "<h1>Vision</h1>" in during and answered <= 2
    # and once its task has prepared what was asked for lately, the page is made again before it is asked
    asked_prepare()
    after, answered = _made(client, _team_url(world), PERIOD)
    assert "<h1>Vision (new)</h1>" in after and answered <= 2


def test_a_page_of_a_viewer_gone_is_not_made_again(world: TeamHomeWorld) -> None:
    someone = User.objects.create_user("gone", password="pw")
    TeamMembership.objects.create(user=someone, team=world.vision)
    _made(_client(someone), _team_url(world), PERIOD)
    _made(_client(world.lead), _team_url(world), PERIOD)
    someone.is_active = False
    someone.save()
    # when the pages asked for lately are made again after an ingest
    ingest_started()
    data_changed(by_ingest=True)
    asked_prepare()
    # then the page of the viewer who is gone is forgotten: it is not made again after the next ingest
    asked = cache.sorted_top(PAGES_ASKED_KEY, min_score=0, count=1000)  # type: ignore[attr-defined]
    assert [m.split(",")[0] for m in asked] == [f"[{world.lead.pk}"]


def test_a_page_asked_over_https_is_made_again_over_https_after_an_ingest(world: TeamHomeWorld) -> None:
    # given the lead's page asked through a TLS proxy (the whole URL, scheme included, is the page's key)
    client = _client(world.lead)
    client.get(_team_url(world), PERIOD, secure=True)
    # when an ingest writes and its task prepares what was asked for lately
    ingest_started()
    Team.objects.filter(pk=world.vision.pk).update(display_name="Vision (new)")
    data_changed(by_ingest=True)
    asked_prepare()
    # then the next ask over https reads the page made for it, already new
    with CaptureQueriesContext(connection) as queries:
        after = client.get(_team_url(world), PERIOD, secure=True).content.decode()
    assert "<h1>Vision (new)</h1>" in after and len(queries) <= 2
