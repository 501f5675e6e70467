"""Single sign-on's authentication backends (apps/sso/backends.py): the provider's endpoints, set one by one or
discovered once from the issuer (and refused when the document names another issuer); a login answered only on the
provider's callback; an id_token refused unless it is for this client, from this provider and dated; the password
login of superusers only when the glass is broken. The whole flow against a provider: tests/sso/test_login.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.test import RequestFactory
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.sso import backends
from apps.sso.backends import BreakGlassBackend, ProviderEndpoints, SsoBackend, provider_endpoints
from tests.json_server import JsonServer, json_server

CLIENT_ID = "fleetwatt"


@pytest.fixture
def issuer(settings: Any) -> Iterator[JsonServer]:
    """An issuer whose discovery document names itself; the explicit endpoints unset."""
    with json_server() as server:
        settings.FLEETWATT_OIDC_ISSUER = server.url
        for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS"):
            setattr(settings, f"OIDC_OP_{name}_ENDPOINT", "")
        server.answer = (200, {"issuer": server.url + "/", "authorization_endpoint": server.url + "/auth",
                               "token_endpoint": server.url + "/token", "userinfo_endpoint": server.url + "/me",
                               "jwks_uri": server.url + "/jwks"})  # fmt: skip
        backends._discovered.clear()
        yield server
        backends._discovered.clear()


# provider_endpoints


def test_the_endpoints_are_discovered_once_per_process(issuer: JsonServer) -> None:
    first = provider_endpoints()
    assert first == ProviderEndpoints(
        issuer=issuer.url, authorization=issuer.url + "/auth", token=issuer.url + "/token",
        userinfo=issuer.url + "/me", jwks=issuer.url + "/jwks",
    )  # fmt: skip
    assert provider_endpoints() == first
    assert [a["path"] for a in issuer.asked] == ["/.well-known/openid-configuration"]


def test_an_endpoint_set_by_hand_wins_over_the_discovered_one(issuer: JsonServer, settings: Any) -> None:
    settings.OIDC_OP_TOKEN_ENDPOINT = "https://idp.internal/token"
    assert provider_endpoints().token == "https://idp.internal/token"
    assert provider_endpoints().jwks == issuer.url + "/jwks"


def test_all_four_set_by_hand_need_no_discovery(settings: Any) -> None:
    settings.FLEETWATT_OIDC_ISSUER = ""
    for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS"):
        setattr(settings, f"OIDC_OP_{name}_ENDPOINT", f"https://idp/{name.lower()}")
    assert provider_endpoints().userinfo == "https://idp/user"


def test_no_issuer_and_not_every_endpoint_is_a_configuration_error(settings: Any) -> None:
    settings.FLEETWATT_OIDC_ISSUER = ""
    settings.OIDC_OP_TOKEN_ENDPOINT = ""
    with pytest.raises(ImproperlyConfigured, match="needs FLEETWATT_OIDC_ISSUER"):
        provider_endpoints()


def test_a_discovery_document_naming_another_issuer_is_refused_and_not_kept(issuer: JsonServer) -> None:
    issuer.answer = (200, {**issuer.answer[1], "issuer": "https://evil.example"})
    with pytest.raises(ImproperlyConfigured, match=r"names another issuer: 'https://evil\.example'"):
        provider_endpoints()
    assert issuer.url not in backends._discovered


# SsoBackend


def _backend(issuer: str = "https://idp") -> SsoBackend:
    backend = SsoBackend()
    backend.OIDC_RP_CLIENT_ID = CLIENT_ID
    backend.endpoints = ProviderEndpoints(issuer=issuer, authorization="", token="", userinfo="", jwks="")
    return backend


def test_only_the_providers_callback_is_answered(settings: Any) -> None:
    settings.FLEETWATT_SSO_ENABLED = True
    callback = RequestFactory().get("/oidc/callback/", {"code": "c", "state": "s"})
    password = RequestFactory().post("/accounts/login/")
    assert SsoBackend().authenticate(password, username="ada", password="pw") is None
    assert SsoBackend().authenticate(callback) is None  # no nonce: not the flow's
    assert SsoBackend().authenticate(None) is None
    settings.FLEETWATT_SSO_ENABLED = False
    assert SsoBackend().authenticate(callback, nonce="n") is None


@pytest.mark.parametrize(
    ("payload", "refused"),
    [
        ({"aud": "another", "iss": "https://idp", "exp": 1, "sub": "s"}, "not for this client"),
        ({"aud": ["x", CLIENT_ID], "iss": "https://other", "exp": 1, "sub": "s"}, "from another issuer"),
        ({"aud": CLIENT_ID, "iss": "https://idp/", "sub": "s"}, "no exp or no sub"),
        ({"aud": CLIENT_ID, "iss": "https://idp", "exp": 1}, "no exp or no sub"),
    ],
)
def test_an_id_token_not_for_this_client_from_this_provider_and_dated_is_refused(
    monkeypatch, payload: dict[str, Any], refused: str
) -> None:
    monkeypatch.setattr(OIDCAuthenticationBackend, "verify_token", lambda self, token, **kw: payload)
    with pytest.raises(SuspiciousOperation, match=refused):
        _backend().verify_token("token", nonce="n")


def test_a_good_id_token_is_its_payload(monkeypatch) -> None:
    payload = {"aud": [CLIENT_ID], "iss": "https://idp/", "exp": 1, "sub": "s"}
    monkeypatch.setattr(OIDCAuthenticationBackend, "verify_token", lambda self, token, **kw: payload)
    assert _backend().verify_token("token", nonce="n") == payload
    assert _backend(issuer="").verify_token("token") == payload  # endpoints set by hand: no issuer to compare


# BreakGlassBackend


@pytest.mark.django_db
def test_breaking_the_glass_lets_only_an_active_superuser_in() -> None:
    root = User.objects.create_superuser("root", password="pw")
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    gone = User.objects.create_superuser("gone", password="pw", is_active=False)
    backend = BreakGlassBackend()
    assert backend.user_can_authenticate(root)
    assert not backend.user_can_authenticate(staff)
    assert not backend.user_can_authenticate(gone)
    assert not backend.user_can_authenticate(AnonymousUser())
    request = RequestFactory().post("/accounts/login/")
    assert backend.authenticate(request, username="root", password="pw") == root
    assert backend.authenticate(request, username="staff", password="pw") is None
