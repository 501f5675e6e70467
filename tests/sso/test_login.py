"""Single sign-on end to end: a real OpenID Connect provider (tests/sso/oidc_provider.py, Authlib) on a free
port, the config file's `sso` section applied with `apply_config`, and the browser's round trip followed
redirect by redirect: fleetwatt -> the provider's authorization endpoint -> fleetwatt's callback, which
exchanges the code, checks the RS256 id_token against the provider's JWKS and reads userinfo's groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import requests
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client

from apps.fleet.models import Team, TeamMembership
from apps.sso import backends
from apps.sso.models import SsoGrant, SsoIdentity
from tests.factories import JobFactory, TeamFactory, TeamMembershipFactory
from tests.sso.oidc_provider import Account, OidcProvider

pytestmark = pytest.mark.django_db

CLIENT_ID = "fleetwatt"
CLIENT_SECRET = "test-client-secret"
CALLBACK = "http://testserver/accounts/sso/callback/"
THROTTLE = "apps.core.access.login_throttle.LoginThrottleBackend"
PASSWORDS = "apps.core.backends.PasswordBackend"
EARLIER_PASSWORDS = "django.contrib.auth.backends.ModelBackend"  # sessions logged in before PasswordBackend
SSO = "apps.sso.backends.SsoBackend"

CONFIG = """
teams:
  - {name: ml, display_name: Machine learning}
  - {name: vision, display_name: Vision}
sso:
  groups_claim: groups
  map:
    - {group: gpu-ml, team: ml, role: member}
    - {group: ml-leads, team: ml, role: lead}
    - {group: gpu-vision, team: vision, role: member}
    - {group: finops, role: finance}
    - {group: fleet-admins, role: admin}
"""


@pytest.fixture
def provider() -> Iterator[OidcProvider]:
    server = OidcProvider(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, redirect_uri=CALLBACK).start()
    server.users["ada"] = Account(sub="sub-ada", preferred_username="ada", email="ada@example.org", groups=["gpu-ml"])
    server.users["nobody"] = Account(
        sub="sub-nobody", preferred_username="nobody", email="nobody@example.org", groups=["sales"]
    )
    server.login_as = "ada"
    yield server
    server.stop()


@pytest.fixture
def sso(settings: Any, provider: OidcProvider, tmp_path: Path) -> OidcProvider:
    """Single sign-on set up as an operator would: the issuer (endpoints discovered) and the client, and the
    config file with the `sso` section applied."""
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.FLEETWATT_OIDC_ISSUER = provider.issuer
    settings.FLEETWATT_SSO_ENABLED = True
    settings.AUTHENTICATION_BACKENDS = [THROTTLE, PASSWORDS, EARLIER_PASSWORDS, SSO]
    backends._discovered.clear()
    config = tmp_path / "fleet.yaml"
    config.write_text(CONFIG)
    call_command("apply_config", str(config), stdout=open("/dev/null", "w"))  # noqa: SIM115
    return provider


def _start(client: Client, next_url: str = "") -> str:
    """Click "Sign in with SSO": the provider's authorization URL fleetwatt redirects to."""
    response = client.get("/accounts/sso/start/" + (f"?next={next_url}" if next_url else ""))
    assert response.status_code == 302, response.content
    location: str = response["Location"]
    return location


def _provider_answer(authorize_url: str) -> str:
    """The provider signs the user in and redirects back: fleetwatt's callback URL with a code and the state."""
    answer = requests.get(authorize_url, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    callback: str = answer.headers["Location"]
    assert callback.startswith(CALLBACK)
    return callback


def _callback(client: Client, url: str) -> Any:
    parts = urlsplit(url)
    return client.get(parts.path, dict(parse_qsl(parts.query)))


def sso_login(client: Client) -> Any:
    """The whole round trip, as a browser follows it."""
    return _callback(client, _provider_answer(_start(client)))


def _logged_in_as(client: Client) -> User | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id) if user_id else None


def _roles(user: User) -> dict[str, str]:
    return dict(TeamMembership.objects.filter(user=user).values_list("team__name", "role"))


def test_the_login_page_offers_sso_when_it_is_set_up(sso: OidcProvider, client: Client) -> None:
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with SSO" in page and 'name="password"' in page


def test_the_login_page_is_unchanged_without_sso(client: Client) -> None:
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with SSO" not in page and 'name="password"' in page
    assert client.get("/accounts/sso/start/").status_code == 404


def test_a_user_logs_in_with_sso_gets_the_mapped_team_and_sees_its_data(sso: OidcProvider, client: Client) -> None:
    # given a job of each team
    ml_job = JobFactory(team=Team.objects.get(name="ml"))
    vision_job = JobFactory(team=Team.objects.get(name="vision"), cluster=ml_job.cluster)
    # when ada signs in through the provider, her groups being gpu-ml
    response = sso_login(client)
    # then she is logged in, as a new user linked to her subject, member of ml
    assert response.status_code == 302 and response["Location"] == "/home/"  # where the login lands: her team
    ada = _logged_in_as(client)
    assert ada is not None and ada.username == "ada" and ada.email == "ada@example.org"
    assert not ada.has_usable_password()
    assert SsoIdentity.objects.get(user=ada).subject == "sub-ada"
    assert _roles(ada) == {"ml": "member"} and not ada.is_staff
    # and she sees ml's data, not vision's
    ml, vision = Team.objects.get(name="ml"), Team.objects.get(name="vision")
    assert client.get(f"/teams/{ml.id}/").status_code == 200
    assert client.get(f"/teams/{vision.id}/").status_code == 404
    jobs = client.get("/api/jobs/").json()["results"]
    assert [j["job_id"] for j in jobs] == [ml_job.job_id]
    assert client.get(f"/jobs/{vision_job.id}/").status_code == 404
    # and the provider was asked for its discovery document, a token, its keys and userinfo
    assert {"/.well-known/openid-configuration", "/token", "/jwks", "/userinfo"} <= set(sso.requests)


def test_the_next_page_is_kept_through_the_round_trip(sso: OidcProvider, client: Client) -> None:
    ml = Team.objects.get(name="ml")
    response = _callback(client, _provider_answer(_start(client, next_url=f"/teams/{ml.id}/")))
    assert response.status_code == 302 and response["Location"] == f"/teams/{ml.id}/"


def test_memberships_follow_the_groups_from_one_login_to_the_next(sso: OidcProvider, client: Client) -> None:
    # given ada logged in once as a member of ml
    sso_login(client)
    ada = User.objects.get(username="ada")
    assert _roles(ada) == {"ml": "member"}
    # and an admin gave her a membership of another team by hand
    search = TeamFactory(name="search")
    TeamMembershipFactory(user=ada, team=search, role="member")
    # when her groups change at the provider: she leads ml, joins vision and finance
    sso.users["ada"].groups = ["ml-leads", "gpu-vision", "finops"]
    client.logout()
    sso_login(client)
    # then her memberships follow, and the hand-made one stays
    ada.refresh_from_db()
    assert _roles(ada) == {"ml": "lead", "vision": "member", "search": "member"}
    assert ada.groups.filter(name="finance").exists()
    assert set(SsoGrant.objects.filter(user=ada).values_list("role", "team__name")) == {
        ("lead", "ml"),
        ("member", "vision"),
        ("finance", None),
    }
    # when she leaves every group but gpu-vision, and becomes an admin
    sso.users["ada"].groups = ["gpu-vision", "fleet-admins"]
    client.logout()
    assert sso_login(client).status_code == 302
    ada.refresh_from_db()
    # then what single sign-on gave and no longer gives is taken back; the admin's membership stays
    assert _roles(ada) == {"vision": "member", "search": "member"}
    assert not ada.groups.filter(name="finance").exists()
    assert ada.is_staff and ada.is_superuser
    # when her groups no longer give her anything
    sso.users["ada"].groups = []
    client.logout()
    response = sso_login(client)
    # then the login still works through the membership the admin gave her, and nothing else is left
    ada.refresh_from_db()
    assert response.status_code == 302 and _logged_in_as(client) == ada
    assert _roles(ada) == {"search": "member"} and not ada.is_staff and not ada.is_superuser
    assert not SsoGrant.objects.filter(user=ada).exists()
    # and once the admin takes that away too, she is refused
    TeamMembership.objects.filter(user=ada).delete()
    client.logout()
    response = sso_login(client)
    assert response.status_code == 403 and _logged_in_as(client) is None
    assert b"no fleetwatt team" in response.content


def test_a_user_with_no_mapped_group_is_refused_and_nothing_is_created(sso: OidcProvider, client: Client) -> None:
    # given someone whose only group (sales) maps to nothing
    sso.login_as = "nobody"
    users, groups = User.objects.count(), Group.objects.count()
    # when they sign in
    response = sso_login(client)
    # then a page says why, they are not logged in, and nothing was created
    assert response.status_code == 403
    assert b"Your account has no fleetwatt team" in response.content and b"ask your fleetwatt admin" in (
        response.content.lower()
    )
    assert _logged_in_as(client) is None
    assert (User.objects.count(), Group.objects.count()) == (users, groups)
    assert not SsoIdentity.objects.exists() and not SsoGrant.objects.exists()


def test_a_local_account_of_the_same_name_is_not_taken_over(sso: OidcProvider, client: Client) -> None:
    # given a local user "ada" (another person, perhaps) with a password
    local = User.objects.create_user("ada", password="local-password")
    # when the provider's ada signs in
    response = sso_login(client)
    # then she is refused (an admin links the accounts), and the local account is untouched
    assert response.status_code == 403 and b"already exists" in response.content
    assert _logged_in_as(client) is None and not SsoIdentity.objects.exists()
    assert _roles(local) == {}
    # when an admin links them
    SsoIdentity.objects.create(user=local, issuer=sso.issuer, subject="sub-ada")
    # then her login is that account
    assert sso_login(client).status_code == 302 and _logged_in_as(client) == local
    assert _roles(local) == {"ml": "member"}


def test_a_wrong_state_is_refused(sso: OidcProvider, client: Client) -> None:
    callback = _provider_answer(_start(client))
    parts = urlsplit(callback)
    query = dict(parse_qsl(parts.query))
    forged = urlunsplit(parts._replace(query=urlencode({**query, "state": "not-the-one-fleetwatt-sent"})))
    response = _callback(client, forged)
    assert response.status_code == 400 and _logged_in_as(client) is None
    assert not User.objects.filter(username="ada").exists()
    # and the right state of that round trip, replayed after its code was used, is refused too
    assert _callback(client, callback).status_code == 302
    client.logout()
    assert _callback(client, callback).status_code in (400, 403) and _logged_in_as(client) is None


def test_an_id_token_with_a_bad_signature_is_refused(sso: OidcProvider, client: Client) -> None:
    # given a provider that signs with a key its JWKS does not hold (same key id)
    sso.sign_with_wrong_key = True
    # when ada signs in
    response = sso_login(client)
    # then the token does not verify and nothing is created
    assert response.status_code == 403 and b"could not be verified" in response.content
    assert _logged_in_as(client) is None and not User.objects.filter(username="ada").exists()


def test_an_id_token_for_another_client_is_refused(sso: OidcProvider, client: Client) -> None:
    # given a provider whose id_token names another client as its audience
    sso.audience = "another-app"
    # when ada signs in
    response = sso_login(client)
    # then it is refused: a token for another application does not log anyone in here
    assert response.status_code == 403 and b"not for this client" in response.content
    assert _logged_in_as(client) is None and not User.objects.filter(username="ada").exists()


def test_local_login_off_refuses_passwords_offers_only_sso(sso: OidcProvider, client: Client, settings: Any) -> None:
    # given local login turned off (FLEETWATT_LOCAL_LOGIN=0: the settings drop the password backend)
    settings.FLEETWATT_LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = [THROTTLE, SSO]
    User.objects.create_user("boss", password="the-right-one", is_staff=True, is_superuser=True)
    # then the login page only offers SSO
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with SSO" in page and 'name="password"' not in page
    # and a password is refused, on the login page and on the admin's
    response = client.post("/accounts/login/", {"username": "boss", "password": "the-right-one"})
    assert response.status_code == 403 and _logged_in_as(client) is None
    client.post("/admin/login/", {"username": "boss", "password": "the-right-one", "next": "/admin/"})
    assert _logged_in_as(client) is None
    # and the admin's login offers no password form that could not log anyone in: the login page, then back
    admin_login = client.get("/admin/login/?next=/admin/fleet/")
    assert admin_login.status_code == 302 and admin_login["Location"] == "/accounts/login/?next=/admin/fleet/"
    # while SSO still logs in
    assert sso_login(client).status_code == 302 and _logged_in_as(client) is not None


def test_break_glass_lets_superusers_only_log_in_with_a_password(
    sso: OidcProvider, client: Client, settings: Any
) -> None:
    # given local login off, and the break-glass flag on (FLEETWATT_BREAK_GLASS_LOGIN=1)
    settings.FLEETWATT_LOCAL_LOGIN = False
    settings.FLEETWATT_BREAK_GLASS_LOGIN = True
    settings.AUTHENTICATION_BACKENDS = [THROTTLE, SSO, "apps.sso.backends.BreakGlassBackend"]
    User.objects.create_superuser("root", password="break-glass-password")
    User.objects.create_user("ada-local", password="a-password")
    assert "superusers only" in client.get("/accounts/login/").content.decode()
    # a superuser logs in with a password
    client.post("/accounts/login/", {"username": "root", "password": "break-glass-password"})
    assert (user := _logged_in_as(client)) is not None and user.username == "root"
    # anyone else does not
    other = Client()
    other.post("/accounts/login/", {"username": "ada-local", "password": "a-password"})
    assert _logged_in_as(other) is None


def test_the_password_login_keeps_working_beside_sso(sso: OidcProvider, client: Client) -> None:
    User.objects.create_user("local", password="a-password")
    response = client.post("/accounts/login/", {"username": "local", "password": "a-password"})
    assert response.status_code == 302 and _logged_in_as(client) is not None


def test_the_login_throttle_stands_in_front_of_sso(sso: OidcProvider, settings: Any) -> None:
    from axes.models import AccessAttempt

    # a refused SSO login counts as a failure of its address
    sso.login_as = "nobody"
    assert sso_login(Client(REMOTE_ADDR="192.0.2.40")).status_code == 403
    assert AccessAttempt.objects.filter(ip_address="192.0.2.40").exists()
    # an address locked out by failed password logins is refused SSO too
    sso.login_as = "ada"
    locked = Client(REMOTE_ADDR="192.0.2.41")
    for n in range(settings.AXES_FAILURE_LIMIT):
        locked.post("/accounts/login/", {"username": f"someone-{n}", "password": "guess"})
    response = sso_login(locked)
    assert response.status_code == 429 and b"Too many failed logins" in response.content
    assert _logged_in_as(locked) is None
    assert not User.objects.filter(username="ada").exists()
    # while another address signs in
    other = Client(REMOTE_ADDR="192.0.2.42")
    assert sso_login(other).status_code == 302 and _logged_in_as(other) is not None
