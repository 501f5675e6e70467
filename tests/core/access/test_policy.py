"""apps.core.access.policy: who sees what and who writes. Admins see every team and write; finance sees every team and
writes nothing, whatever its credentials; a member sees the teams it is a member of. What a user may see is read in
one query, once a request, and a session's or a token's user comes with it (no second round trip); the scope key is
the same for users who see the same rows. Pages for admins send the anonymous to the site's login and refuse the
others with the site's 403."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.test import RequestFactory

from apps.core.access.policy import (
    FINANCE_GROUP,
    acting_user,
    admin_required,
    member_team_ids,
    user_is_read_only,
    user_sees_all_teams,
    user_with_viewer,
    viewer_scope,
)
from apps.fleet.models import TeamMembership
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


def _finance(name: str = "fin", **fields: object) -> User:
    user = User.objects.create_user(name, **fields)
    user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return user


def _member(name: str, *teams) -> User:
    user = User.objects.create_user(name)
    for team in teams:
        TeamMembership.objects.create(user=user, team=team)
    return user


def test_each_role_sees_and_writes_what_the_policy_says() -> None:
    vision, nlp = TeamFactory(name="vision"), TeamFactory(name="nlp")
    admin = User.objects.create_user("root", is_staff=True)
    superuser = User.objects.create_user("su", is_superuser=True)
    finance = _finance()
    finance_admin = _finance("fin-admin", is_staff=True)  # staff in the group stay admins
    member = _member("ada", nlp, vision)
    loner = _member("bob")
    anonymous = AnonymousUser()

    assert [user_sees_all_teams(u) for u in (admin, superuser, finance, finance_admin, member, loner, anonymous)] == [
        True, True, True, True, False, False, False,
    ]  # fmt: skip
    assert [user_is_read_only(u) for u in (admin, superuser, finance, finance_admin, member, loner, anonymous)] == [
        False, False, True, False, False, False, False,
    ]  # fmt: skip
    assert viewer_scope(admin) == viewer_scope(superuser) == viewer_scope(finance_admin) == "staff"
    assert viewer_scope(finance) == "finance"
    assert viewer_scope(member) == f"{min(vision.pk, nlp.pk)},{max(vision.pk, nlp.pk)}"  # in id order: one key
    assert viewer_scope(loner) == ""
    assert member_team_ids(member) == tuple(sorted([vision.pk, nlp.pk]))


def test_two_members_of_the_same_teams_share_a_scope_key() -> None:
    vision, nlp = TeamFactory(), TeamFactory()
    assert viewer_scope(_member("a", vision, nlp)) == viewer_scope(_member("b", nlp, vision))
    assert viewer_scope(_member("c", vision)) != viewer_scope(_member("d", nlp))


def test_what_a_user_may_see_is_read_once_a_request(django_assert_num_queries) -> None:
    user = _member("ada", TeamFactory())
    user = User.objects.get(pk=user.pk)  # a fresh object, as a request gets
    with django_assert_num_queries(1):
        for _ in range(3):
            user_sees_all_teams(user), user_is_read_only(user), viewer_scope(user), member_team_ids(user)


def test_a_sessions_user_comes_with_what_it_may_see_in_one_query(django_assert_num_queries) -> None:
    team = TeamFactory()
    finance, member = _finance(), _member("ada", team)
    with django_assert_num_queries(1):
        loaded = user_with_viewer(member.pk)
    assert loaded is not None and loaded.username == "ada" and loaded.pk == member.pk
    with django_assert_num_queries(0):
        assert member_team_ids(loaded) == (team.pk,) and not user_sees_all_teams(loaded)
    with django_assert_num_queries(1):
        loaded_finance = user_with_viewer(finance.pk)
    with django_assert_num_queries(0):
        assert loaded_finance is not None and user_is_read_only(loaded_finance)
    assert user_with_viewer(10**9) is None


def test_what_a_user_may_see_is_what_it_was_when_the_request_began() -> None:
    # given a member's request that has asked once
    team = TeamFactory()
    user = _member("ada")
    assert member_team_ids(user) == ()
    # when a membership is added meanwhile
    TeamMembership.objects.create(user=user, team=team)
    # then this request keeps its answer; the next request (a new user object) sees the team
    assert member_team_ids(user) == ()
    assert member_team_ids(User.objects.get(pk=user.pk)) == (team.pk,)


def test_an_anonymous_decision_is_refused_never_recorded() -> None:
    with pytest.raises(PermissionDenied):
        acting_user(AnonymousUser())
    admin = User.objects.create_user("root", is_staff=True)
    assert acting_user(admin) is admin


@admin_required
def _admin_page(request: HttpRequest, job_id: int) -> HttpResponse:
    return HttpResponse(f"job {job_id}")


def test_an_admin_page_sends_the_anonymous_to_login_and_refuses_others() -> None:
    request = RequestFactory().get("/audit/?kind=x")
    request.user = AnonymousUser()
    sent = _admin_page(request, job_id=3)
    assert sent.status_code == 302
    assert (
        sent["Location"] == f"{resolve_url(settings.LOGIN_URL)}?next=/audit/%3Fkind%3Dx"
    )  # the site's, not the admin's
    request.user = _finance()
    with pytest.raises(PermissionDenied, match="for admins"):
        _admin_page(request, job_id=3)
    request.user = User.objects.create_user("root", is_staff=True)
    assert _admin_page(request, job_id=3).content == b"job 3"
    assert _admin_page.__name__ == "_admin_page"
