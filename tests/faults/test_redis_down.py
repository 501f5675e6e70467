"""Redis down made every logged-in request a 500 (sessions are cached in Redis, API tokens are throttled
through it), an HTML 500 even for the API, while /healthz said ok. Now the app degrades: sessions come
from Postgres, tokens pass unthrottled (with a log line), rollups are computed, /healthz says Redis is
down.

Tried with a redis-server of the test's own, killed with SIGKILL under a running gunicorn, and stalled
with CLIENT PAUSE (it keeps its data) under the test client. /healthz: tests/ops/test_healthz.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import requests
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.cached_db import KEY_PREFIX
from django.core.cache import caches
from django.test import Client

from apps.core.access.policy import FINANCE_GROUP
from apps.core.models import ApiToken
from apps.fleet.models import Team
from tests.factories import JobFactory, TeamFactory, TeamMembershipFactory, UserFactory
from tests.servers import RedisServer, WebServer, child_env, login, redis_server, web_server_start, web_server_stop

pytestmark = pytest.mark.django_db(transaction=True)

PERIOD = "start=2026-11-01&end=2026-11-08"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path / "redis") as server:
        yield server


@pytest.fixture
def web(private_redis: RedisServer, tmp_path: Path) -> Iterator[WebServer]:
    """gunicorn as deployed (DEBUG off), one process, its cache, sessions and throttles in the private Redis."""
    env = child_env(FLEETWATT_TEST_REDIS_URL=private_redis.url, DJANGO_DEBUG="0", WEB_CONCURRENCY="1")
    server = web_server_start(tmp_path / "web.log", env=env)
    yield server
    web_server_stop(server)


@pytest.fixture
def world() -> dict[str, object]:
    team = TeamFactory(name="vision")
    member = UserFactory(username="ada")
    TeamMembershipFactory(user=member, team=team)
    JobFactory(team=team)
    finance = UserFactory(username="fin")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    _, key = ApiToken.issue(user=finance, name="ERP export")
    return {"team": team, "key": key}


def test_logged_in_people_and_api_tokens_are_served_while_redis_is_down(
    world, private_redis: RedisServer, web: WebServer
) -> None:
    team: Team = world["team"]  # type: ignore[assignment]
    bearer = {"Authorization": f"Bearer {world['key']}"}
    # given a member who logged in while Redis was up
    ada = login(web.url, "ada", "pw")
    assert ada.get(f"{web.url}/teams/{team.pk}/", timeout=10).status_code == 200

    # when Redis dies
    private_redis.kill()

    # then the member is still logged in, and the team page and its rollup are computed
    page = ada.get(f"{web.url}/teams/{team.pk}/", allow_redirects=False, timeout=10)
    assert page.status_code == 200, (page.status_code, page.text[:300])
    rollup = ada.get(f"{web.url}/api/teams/{team.pk}/rollup/?{PERIOD}", timeout=10)
    assert rollup.status_code == 200, (rollup.status_code, rollup.text[:300])
    assert "periods" in rollup.json()
    # and a finance tool's token reads the API, unthrottled
    for _ in range(3):
        jobs = requests.get(f"{web.url}/api/jobs/", headers=bearer, timeout=10)
        assert jobs.status_code == 200, (jobs.status_code, jobs.text[:300])
        assert len(jobs.json()["results"]) == 1
    # and someone can still log in, and out for good
    again = login(web.url, "ada", "pw")
    assert again.get(f"{web.url}/", allow_redirects=False, timeout=10).status_code == 200
    logout = again.post(
        f"{web.url}/accounts/logout/",
        headers={"X-CSRFToken": again.cookies["csrftoken"]},
        allow_redirects=False,
        timeout=10,
    )
    assert logout.status_code == 302
    assert again.get(f"{web.url}/", allow_redirects=False, timeout=10).status_code == 302  # to the login page
    # and the log says why it runs without its cache
    assert "unreachable" in web.output()


def test_a_logout_while_redis_stalls_sticks_when_it_answers_again(
    world, private_redis: RedisServer, settings, caplog
) -> None:
    # given sessions cached in a Redis that keeps its data but stops answering for a while
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": private_redis.url,
            "OPTIONS": {
                **settings.CACHES["default"].get("OPTIONS", {}),
                "socket_timeout": 0.3,
                "retry_after_s": 0.2,
            },
        }
    }
    client = Client()
    assert client.login(username="ada", password="pw")
    session_key = client.cookies["sessionid"].value
    control = redis.Redis.from_url(private_redis.url)
    assert control.exists(f":1:{KEY_PREFIX}{session_key}")

    # when Redis stalls (CLIENT PAUSE: its data stays) while the member logs out
    control.execute_command("CLIENT", "PAUSE", 1500, "ALL")
    resumes = time.monotonic() + 1.5
    with caplog.at_level(logging.WARNING):
        assert client.post("/accounts/logout/").status_code == 302
    assert "unreachable" in caplog.text
    time.sleep(max(0.0, resumes - time.monotonic()) + 0.3)

    # then, once Redis answers again, the old session does not come back from the cache
    caches["default"].get("anything")  # the first contact deletes what Redis kept but missed a write of
    assert not control.exists(f":1:{KEY_PREFIX}{session_key}")
    stale = Client()
    stale.cookies["sessionid"] = session_key
    assert stale.get("/").status_code == 302
