"""apps.core.access.authentication: a named API token is found by its lookup and checked against its hash; a header
that is not ours is left to the other authentications, one of ours that is wrong, revoked, expired or of an inactive
user is refused saying why; its last use is written at most once a minute; its user comes with what it may see in
the same query. The permissions: tokens and finance read only, fleet-wide data for admins and finance. The throttle,
through a cache without Redis's one round trip (its other path): a count per token and window. Redis's path and the
429 through the API: tests/core/test_api_token_throttle.py."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.cache.backends.locmem import LocMemCache
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from apps.core.access.authentication import (
    LAST_USED_RESOLUTION,
    ApiTokenAuthentication,
    ApiTokenRateThrottle,
    IsAdminOrFinance,
    ReadOnlyForApiTokens,
    ReadOnlyForFinance,
)
from apps.core.access.policy import FINANCE_GROUP, member_team_ids
from apps.core.models import ApiToken
from apps.fleet.models import TeamMembership
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


def _request(authorization: str | None = None, method: str = "get") -> Request:
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization is not None else {}
    return Request(getattr(APIRequestFactory(), method)("/api/jobs/", **headers))


@pytest.fixture
def member() -> User:
    user = User.objects.create_user("tool-owner")
    TeamMembership.objects.create(user=user, team=TeamFactory(name="vision"))
    return user


@pytest.mark.parametrize("header", [None, "", "Bearer", "Token abc", "Basic Zm9vOmJhcg==", "Bearer abc", "bearer fw_x"])
def test_a_header_that_is_not_a_named_token_is_left_to_the_others(header: str | None) -> None:
    assert ApiTokenAuthentication().authenticate(_request(header)) is None


def test_a_good_token_gives_its_user_with_what_it_may_see_in_one_query(member, django_assert_num_queries) -> None:
    token, key = ApiToken.issue(user=member, name="erp")
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())  # (used a moment ago: no write)
    teams = tuple(member.teams.values_list("pk", flat=True))
    with django_assert_num_queries(1):
        user, found = ApiTokenAuthentication().authenticate(_request(f"Bearer {key}"))
        assert member_team_ids(user) == teams  # already known: no query of its own
    assert user.pk == member.pk and found.pk == token.pk


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (lambda key, token: key[:-1] + ("A" if key[-1] != "A" else "B"), "Invalid or revoked API token."),
        (lambda key, token: "fw_" + "x" * 40, "Invalid or revoked API token."),
        (lambda key, token: ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now()) and key,
         "Invalid or revoked API token."),
        (lambda key, token: User.objects.filter(pk=token.user_id).update(is_active=False) and key,
         "The token's user is inactive."),
    ],
)  # fmt: skip
def test_a_wrong_revoked_or_orphaned_token_is_refused_saying_why(member, spoil, said: str) -> None:
    token, key = ApiToken.issue(user=member, name="erp")
    sent = spoil(key, token)
    with pytest.raises(exceptions.AuthenticationFailed) as refused:
        ApiTokenAuthentication().authenticate(_request(f"Bearer {sent}"))
    assert str(refused.value.detail) == said


def test_an_expired_token_is_refused_saying_when_it_expired(member) -> None:
    _, key = ApiToken.issue(user=member, name="erp", expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(exceptions.AuthenticationFailed, match=r"expired at \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC"):
        ApiTokenAuthentication().authenticate(_request(f"Bearer {key}"))


def test_the_last_use_is_written_at_most_once_a_minute(member) -> None:
    token, key = ApiToken.issue(user=member, name="erp")
    auth = ApiTokenAuthentication()
    auth.authenticate(_request(f"Bearer {key}"))
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    auth.authenticate(_request(f"Bearer {key}"))
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first  # within the minute: not written again
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - LAST_USED_RESOLUTION - timedelta(seconds=1))
    auth.authenticate(_request(f"Bearer {key}"))
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


def test_the_challenge_names_the_scheme() -> None:
    assert ApiTokenAuthentication().authenticate_header(_request()) == "Bearer"


def _as(user: Any, auth: Any = None, method: str = "get") -> Request:
    request = _request(method=method)
    request.user, request.auth = user, auth
    return request


def test_tokens_and_finance_only_read_and_fleet_wide_data_is_for_admins_and_finance(member) -> None:
    admin = User.objects.create_user("root", is_staff=True)
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    token = ApiToken(user=admin)
    view = object()
    # a named token reads, whoever its user; a session of the same admin writes
    assert ReadOnlyForApiTokens().has_permission(_as(admin, token, "get"), view)
    assert not ReadOnlyForApiTokens().has_permission(_as(admin, token, "post"), view)
    assert ReadOnlyForApiTokens().has_permission(_as(admin, None, "post"), view)
    # finance reads and writes nothing, whatever its credentials
    assert ReadOnlyForFinance().has_permission(_as(finance, None, "get"), view)
    assert not ReadOnlyForFinance().has_permission(_as(finance, None, "delete"), view)
    assert ReadOnlyForFinance().has_permission(_as(member, None, "post"), view)
    # fleet-wide: admins and finance, not a member, not the anonymous
    allowed = [IsAdminOrFinance().has_permission(_as(u), view) for u in (admin, finance, member, AnonymousUser())]
    assert allowed == [True, True, False, False]


def test_a_request_without_a_named_token_is_not_throttled() -> None:
    throttle = ApiTokenRateThrottle()
    assert throttle.get_cache_key(SimpleNamespace(auth=None), None) is None  # type: ignore[arg-type]
    assert all(throttle.allow_request(SimpleNamespace(auth="drf-token"), None) for _ in range(100))  # type: ignore[arg-type]


def test_without_the_redis_window_count_the_cache_counts_per_token_and_window(monkeypatch) -> None:
    # given a rate of 3 a minute, a cache without window_count (not the fail-open Redis cache), and a fixed clock
    monkeypatch.setattr(ApiTokenRateThrottle, "THROTTLE_RATES", {"api_token": "3/min"})
    monkeypatch.setattr(ApiTokenRateThrottle, "cache", LocMemCache("throttle-test", {}))
    now = [1_800_000_010.0]
    monkeypatch.setattr(ApiTokenRateThrottle, "timer", lambda self: now[0])
    first, second = SimpleNamespace(auth=ApiToken(pk=1)), SimpleNamespace(auth=ApiToken(pk=2))
    # when the first token asks five times and the second once
    verdicts = [ApiTokenRateThrottle().allow_request(first, None) for _ in range(5)]  # type: ignore[arg-type]
    # then three pass; the second token is counted apart
    assert verdicts == [True, True, True, False, False]
    assert ApiTokenRateThrottle().allow_request(second, None)  # type: ignore[arg-type]
    # and a refused request is told when its window ends (the minute [1_800_000_000, 1_800_000_060))
    refused = ApiTokenRateThrottle()
    assert not refused.allow_request(first, None)  # type: ignore[arg-type]
    assert refused.wait() == pytest.approx(50.0)
    # and the next window starts again
    now[0] += 50.0
    assert ApiTokenRateThrottle().allow_request(first, None)  # type: ignore[arg-type]


def test_a_counter_evicted_between_its_add_and_its_increment_counts_one(monkeypatch) -> None:
    class Evicting(LocMemCache):
        def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
            self.delete(key)
            raise ValueError("evicted")

    monkeypatch.setattr(ApiTokenRateThrottle, "THROTTLE_RATES", {"api_token": "1/min"})
    cache = Evicting("throttle-evicting", {})
    monkeypatch.setattr(ApiTokenRateThrottle, "cache", cache)
    assert ApiTokenRateThrottle().allow_request(SimpleNamespace(auth=ApiToken(pk=9)), None)  # type: ignore[arg-type]
    (key,) = [k for k in cache._cache]  # the counter set to 1, not lost
    assert cache.get(key.split(":", 2)[-1]) == 1
