"""The named API tokens' rate (apps.core.access.authentication.ApiTokenRateThrottle): a count per token and window in
Redis, one atomic increment a request; past the rate a 429 saying when to come back; other tokens and sessions
untouched; many clients at once let through exactly the rate."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.core.access.authentication import ApiTokenRateThrottle
from apps.core.models import ApiToken


@pytest.fixture
def three_a_minute(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(ApiTokenRateThrottle, "THROTTLE_RATES", {"api_token": "3/min"})
    # The clock stands still, 10 s into a window: a test's requests never straddle two windows.
    monkeypatch.setattr(ApiTokenRateThrottle, "timer", lambda self: 1_800_000_010.0)
    cache.clear()
    yield
    cache.clear()


def _bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_a_token_past_its_rate_is_told_when_to_come_back_and_others_go_on(db, three_a_minute) -> None:
    # given two tools' tokens and a user with a session, at a rate of 3 a minute
    user = User.objects.create_user("tool", is_staff=True)
    _, first = ApiToken.issue(user=user, name="first")
    _, second = ApiToken.issue(user=user, name="second")
    # when the first asks four times
    answers = [_bearer(first).get("/api/jobs/") for _ in range(4)]
    # then the fourth is refused, saying when its window ends
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert 0 < int(answers[3]["Retry-After"]) <= 60
    # and the second token and the session are counted apart (a session is not throttled)
    assert _bearer(second).get("/api/jobs/").status_code == 200
    session = APIClient()
    session.force_login(user)
    assert all(session.get("/api/jobs/").status_code == 200 for _ in range(5))


def test_twenty_clients_at_once_are_let_through_exactly_the_rate(three_a_minute, monkeypatch) -> None:
    # given one token's rate of 50 a minute, and a window that does not end during the test
    monkeypatch.setattr(ApiTokenRateThrottle, "THROTTLE_RATES", {"api_token": "50/min"})
    monkeypatch.setattr(ApiTokenRateThrottle, "timer", lambda self: 1_800_000_010.0)
    request = SimpleNamespace(auth=ApiToken(pk=424242))
    allowed: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(20)

    def client() -> None:
        start.wait()
        for _ in range(5):
            verdict = ApiTokenRateThrottle().allow_request(request, None)  # type: ignore[arg-type]
            with lock:
                allowed.append(verdict)

    # when 20 clients ask 5 times each at once
    threads = [threading.Thread(target=client) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # then exactly 50 of the 100 went through (a list read and written whole lets more)
    assert len(allowed) == 100 and sum(allowed) == 50
    # and the next window starts again
    monkeypatch.setattr(ApiTokenRateThrottle, "timer", lambda self: 1_800_000_070.0)
    assert ApiTokenRateThrottle().allow_request(request, None)  # type: ignore[arg-type]


def test_a_windows_counter_expires_after_its_first_count_only(db, three_a_minute) -> None:
    # when a window's counter is counted three times
    counts = [cache.window_count("fleetwatt:test:window", timeout=120) for _ in range(3)]  # type: ignore[attr-defined]
    # then it counts up and expires 120 s after its first count, not pushed back by the later ones
    assert counts == [1, 2, 3]
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    ttl = client.ttl(cache.make_and_validate_key("fleetwatt:test:window"))
    assert 115 <= ttl <= 120


def test_a_tokens_request_reads_no_more_than_a_sessions(db, three_a_minute) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # given a member with a token (used once: its last use written) and a session
    user = User.objects.create_user("member")
    _, key = ApiToken.issue(user=user, name="tool")
    token, session = _bearer(key), APIClient()
    session.force_login(user)
    for client in (token, session):
        assert client.get("/api/jobs/").status_code == 200
    # when each asks for the member's jobs
    counted = {}
    for name, client in (("token", token), ("session", session)):
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/jobs/").status_code == 200
        counted[name] = [q["sql"][:60] for q in queries.captured_queries]
    # then the token's request reads no more than the session's: its one query found the token, its user and the
    # teams the user may see, as the session's user is loaded
    assert len(counted["token"]) == len(counted["session"]), counted


def test_with_redis_unreachable_a_tokens_requests_go_through(db, settings, three_a_minute) -> None:
    # given Redis gone (nothing listens where the cache points)
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": "redis://127.0.0.1:9/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2, "retry_after_s": 0.2},
        }
    }
    user = User.objects.create_user("tool", is_staff=True)
    _, key = ApiToken.issue(user=user, name="tool")
    # when a tool asks more often than its rate
    answers = [_bearer(key).get("/api/").status_code for _ in range(5)]
    # then every request is answered (the throttle fails open, as the rest of the cache does)
    assert answers == [200] * 5
