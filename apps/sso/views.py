"""The login pages: the password form and/or "Sign in with SSO", and the provider's way in and back."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from .backends import REFUSAL_ATTRIBUTE, provider_endpoints

PASSWORD_LOGIN_OFF = "Password login is turned off here: sign in with SSO."


def password_login_open() -> bool:
    return bool(settings.FLEETWATT_LOCAL_LOGIN or settings.FLEETWATT_BREAK_GLASS_LOGIN)


class LoginView(auth_views.LoginView):
    """Django's login page, with the SSO button when single sign-on is set up and without the password
    form when local login is off (but for the break-glass superusers)."""

    template_name = "auth/login.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(
            sso_enabled=settings.FLEETWATT_SSO_ENABLED,
            password_login=password_login_open(),
            break_glass=not settings.FLEETWATT_LOCAL_LOGIN and settings.FLEETWATT_BREAK_GLASS_LOGIN,
        )
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not password_login_open():
            return render(request, "auth/sso_refused.html", {"reason": PASSWORD_LOGIN_OFF}, status=403)
        return super().post(request, *args, **kwargs)


def admin_login(request: HttpRequest) -> HttpResponseBase:
    """The admin's login: Django's own form while password login is on. Off, that form could log nobody in:
    the app's login page instead (SSO, and the break-glass form where it is open), which comes back here."""
    if settings.FLEETWATT_LOCAL_LOGIN:
        return admin.site.login(request)
    return redirect_to_login(request.GET.get("next") or reverse("admin:index"))


def _refused(request: HttpRequest, reason: str, status: int) -> HttpResponse:
    return render(request, "auth/sso_refused.html", {"reason": reason}, status=status)


class SsoStartView(OIDCAuthenticationRequestView):
    """To the provider, with a fresh state, nonce and PKCE challenge kept in the session."""

    def __init__(self, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(**kwargs)  # endpoints resolved per request
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.FLEETWATT_SSO_ENABLED:
            raise Http404("single sign-on is not set up")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_endpoints().authorization
        except (OSError, ValueError, KeyError):
            return _refused(request, "The single sign-on provider could not be reached. Try again later.", 503)
        return super().dispatch(request, *args, **kwargs)


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """Back from the provider: a login, or a page that says why not (a wrong or replayed state, a token that
    does not verify, no fleetwatt team)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.FLEETWATT_SSO_ENABLED:
            raise Http404("single sign-on is not set up")
        try:
            return super().dispatch(request, *args, **kwargs)
        except SuspiciousOperation:
            return _refused(request, "This login link is not valid (its state is unknown or was used). Try again.", 400)

    def login_failure(self) -> HttpResponse:
        if self.request.GET.get("error"):
            reason = f"The single sign-on provider refused the login ({self.request.GET['error']})."
        else:
            reason = getattr(self.request, REFUSAL_ATTRIBUTE, "The single sign-on login failed. Try again.")
        return _refused(self.request, reason, 403)
