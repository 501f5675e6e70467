"""A session's user loaded with what it may see in one query; sessions of the earlier password backend still load;
a refused password is checked once."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import Group, User
from django.contrib.auth.signals import user_login_failed
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.core.access import policy as access
from apps.core.backends import PasswordBackend
from apps.fleet.models import Team, TeamMembership

pytestmark = pytest.mark.django_db
PASSWORD = "a-long-enough-passphrase"


@pytest.fixture
def member() -> User:
    user = User.objects.create_user("ada", password=PASSWORD)
    for name in ("vision", "nlp"):
        TeamMembership.objects.create(user=user, team=Team.objects.create(name=name), role="member")
    return user


def _logged_in(user: User, backend: str) -> Client:
    """A browser whose session names `backend`, as a login through it leaves one."""
    client = Client()
    session = client.session
    session[SESSION_KEY], session[BACKEND_SESSION_KEY] = str(user.pk), backend
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    client.cookies["sessionid"] = session.session_key
    return client


def test_a_password_login_names_the_password_backend(member: User) -> None:
    client = Client()
    assert client.login(username="ada", password=PASSWORD)
    assert client.session[BACKEND_SESSION_KEY] == "apps.core.backends.PasswordBackend"


def test_the_user_and_what_it_may_see_come_in_one_query(member: User) -> None:
    client = _logged_in(member, "apps.core.backends.PasswordBackend")
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/teams/").status_code == 200
    user_reads = [q["sql"] for q in queries if 'FROM "auth_user"' in q["sql"] or "FROM auth_user" in q["sql"]]
    assert len(user_reads) == 1
    assert not [q for q in queries if q["sql"].startswith("SELECT EXISTS")]  # no second query for the viewer
    assert {t["name"] for t in client.get("/api/teams/").json()["results"]} == {"vision", "nlp"}


@pytest.mark.parametrize("finance", [False, True])
def test_the_viewer_loaded_with_the_user_is_the_viewer_asked_alone(member: User, finance: bool) -> None:
    if finance:
        member.groups.add(Group.objects.create(name=access.FINANCE_GROUP))
    loaded = access.user_with_viewer(member.pk)
    assert loaded is not None and loaded.pk == member.pk and loaded.username == "ada"
    alone = User.objects.get(pk=member.pk)
    assert access._viewer(loaded) == access._viewer(alone)
    assert access.viewer_scope(loaded) == access.viewer_scope(alone) == ("finance" if finance else _team_ids(member))


def _team_ids(user: User) -> str:
    return ",".join(str(pk) for pk in sorted(TeamMembership.objects.filter(user=user).values_list("team", flat=True)))


def test_a_session_of_the_earlier_password_backend_still_loads(member: User) -> None:
    client = _logged_in(member, "django.contrib.auth.backends.ModelBackend")
    assert client.get("/api/teams/").status_code == 200


@pytest.mark.parametrize("backend", ["apps.core.backends.PasswordBackend", "django.contrib.auth.backends.ModelBackend"])
def test_a_deactivated_or_repassworded_user_is_logged_out(member: User, backend: str) -> None:
    client = _logged_in(member, backend)
    member.set_password("another-long-passphrase")
    member.save()
    assert client.get("/api/teams/").status_code == 401
    client = _logged_in(member, backend)
    User.objects.filter(pk=member.pk).update(is_active=False)
    assert client.get("/api/teams/").status_code == 401


def test_a_gone_user_is_nobody(member: User) -> None:
    assert access.user_with_viewer(member.pk + 1000) is None
    assert PasswordBackend().get_user(member.pk + 1000) is None


def test_a_refused_password_is_checked_once_and_counted_once(member: User, monkeypatch: Any) -> None:
    checks: list[str] = []
    real = User.check_password

    def counted(self: User, raw: str) -> bool:
        checks.append(raw)
        return real(self, raw)

    monkeypatch.setattr(User, "check_password", counted)
    failures: list[Any] = []

    def failed(**kwargs: Any) -> None:
        failures.append(kwargs)

    user_login_failed.connect(failed)
    try:
        assert not Client().login(username="ada", password="wrong")
    finally:
        user_login_failed.disconnect(failed)
    assert checks == ["wrong"]  # Django's ModelBackend, listed after, never checked it again
    assert len(failures) == 1
    assert Client().login(username="ada", password=PASSWORD)
