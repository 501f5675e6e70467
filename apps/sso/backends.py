"""The authentication backends of single sign-on (docs/sso.md).

- SsoBackend: mozilla-django-oidc's authorization code flow (state, nonce, PKCE, the id_token's RS256
  signature against the provider's JWKS), plus what it leaves out: the token's issuer and audience, the
  user found by (issuer, subject), and their teams and roles recomputed from the groups at every login.
- BreakGlassBackend: the password login of superusers only, for when the provider is down and local login
  is off (FLEETWATT_BREAK_GLASS_LOGIN=1).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.core.backends import SessionUserMixin

from .mapping import access_for_groups, groups_from_claims
from .selectors import sso_mapping_read
from .services import SsoClaims, SsoRefused, sso_user_login

REFUSAL_ATTRIBUTE = "fleetwatt_sso_refusal"  # set on the request: why the login was refused, for the page


@dataclass(frozen=True)
class ProviderEndpoints:
    issuer: str
    authorization: str
    token: str
    userinfo: str
    jwks: str


_discovered: dict[str, ProviderEndpoints] = {}
_discovery_lock = threading.Lock()


def provider_endpoints() -> ProviderEndpoints:
    """The provider's endpoints: those set one by one (OIDC_OP_*_ENDPOINT), the others from the issuer's
    discovery document, fetched at the first login and kept for the process (not at start: a provider
    that is down must not stop the site, whose password login may still work)."""
    explicit = {
        "authorization": settings.OIDC_OP_AUTHORIZATION_ENDPOINT,
        "token": settings.OIDC_OP_TOKEN_ENDPOINT,
        "userinfo": settings.OIDC_OP_USER_ENDPOINT,
        "jwks": settings.OIDC_OP_JWKS_ENDPOINT,
    }
    issuer = settings.FLEETWATT_OIDC_ISSUER
    if all(explicit.values()):
        return ProviderEndpoints(issuer=issuer, **explicit)
    if not issuer:
        raise ImproperlyConfigured("single sign-on needs FLEETWATT_OIDC_ISSUER or all four OIDC_OP_*_ENDPOINT")
    with _discovery_lock:
        if issuer not in _discovered:
            url = f"{issuer}/.well-known/openid-configuration"
            response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            document = response.json()
            if document.get("issuer", "").rstrip("/") != issuer:
                raise ImproperlyConfigured(f"{url} names another issuer: {document.get('issuer')!r}")
            _discovered[issuer] = ProviderEndpoints(
                issuer=issuer,
                authorization=document["authorization_endpoint"],
                token=document["token_endpoint"],
                userinfo=document["userinfo_endpoint"],
                jwks=document["jwks_uri"],
            )
        found = _discovered[issuer]
    return ProviderEndpoints(
        issuer=issuer,
        authorization=explicit["authorization"] or found.authorization,
        token=explicit["token"] or found.token,
        userinfo=explicit["userinfo"] or found.userinfo,
        jwks=explicit["jwks"] or found.jwks,
    )


def _refuse(request: HttpRequest, reason: str) -> None:
    setattr(request, REFUSAL_ATTRIBUTE, reason)


class SsoBackend(SessionUserMixin, OIDCAuthenticationBackend):
    """A login through the provider (docs/sso.md). Answers only the provider's callback (a `code` and a
    `state`); a password login passes through it untouched. Its sessions' users are loaded by SessionUserMixin
    (mozilla-django-oidc's get_user would keep a deactivated user's session alive)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django makes a backend for every authenticate() and every request's get_user(): the endpoints
        # (perhaps discovered over the network) are resolved when a callback is answered, not here.
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> AbstractBaseUser | None:
        if request is None or not settings.FLEETWATT_SSO_ENABLED:
            return None
        if "code" not in request.GET or "state" not in request.GET or "nonce" not in kwargs:
            return None  # not the provider's callback (a password login)
        self.endpoints = provider_endpoints()
        self.OIDC_OP_TOKEN_ENDPOINT = self.endpoints.token
        self.OIDC_OP_USER_ENDPOINT = self.endpoints.userinfo
        self.OIDC_OP_JWKS_ENDPOINT = self.endpoints.jwks
        try:
            user: AbstractBaseUser | None = super().authenticate(request, **kwargs)
        except SuspiciousOperation as exc:
            _refuse(request, f"The provider's answer could not be verified ({exc}).")
            return None
        except requests.RequestException:
            _refuse(request, "The single sign-on provider could not be reached or refused the login.")
            return None
        return user

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The signature and nonce (mozilla-django-oidc), then what it does not check: the token is for
        this client (`aud`), from this provider (`iss`, when known) and dated (`exp`)."""
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the id_token is not for this client (aud)")
        issuer = self.endpoints.issuer
        if issuer and str(payload.get("iss", "")).rstrip("/") != issuer:
            raise SuspiciousOperation("the id_token is from another issuer (iss)")
        if "exp" not in payload or "sub" not in payload:
            raise SuspiciousOperation("the id_token has no exp or no sub")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> AbstractBaseUser | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload["sub"]:
            raise SuspiciousOperation("userinfo is about another subject than the id_token")
        claims = {**payload, **userinfo}
        mapping = sso_mapping_read()
        groups = groups_from_claims(claims, mapping.groups_claim)
        username = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])[:150]
        try:
            return sso_user_login(
                claims=SsoClaims(
                    issuer=str(payload.get("iss", "")).rstrip("/"),
                    subject=str(payload["sub"]),
                    username=username,
                    email=str(claims.get("email") or ""),
                    first_name=str(claims.get("given_name") or ""),
                    last_name=str(claims.get("family_name") or ""),
                ),
                access=access_for_groups(groups, mapping.rules),
                groups=sorted(groups),
            )
        except SsoRefused as exc:
            _refuse(self.request, str(exc))
            return None


class BreakGlassBackend(SessionUserMixin, ModelBackend):
    """The password login, for superusers only: the way in when local login is off and the provider is
    down (FLEETWATT_BREAK_GLASS_LOGIN=1; docs/sso.md, "Break glass")."""

    def user_can_authenticate(self, user: User | AnonymousUser | None) -> bool:
        return super().user_can_authenticate(user) and bool(getattr(user, "is_superuser", False))
