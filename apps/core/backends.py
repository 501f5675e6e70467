"""How a session's user is loaded on every request, and the password login that names it.

Django loads a session's user with `ModelBackend.get_user` (a query built by the ORM), then fleetwatt asks what
that user may see (apps.core.access.policy: a second query). Every request of the dashboard and the API does both; the
backends here do it in one written-out query (`user_with_viewer`). A session names the backend that logged it in
(`settings.AUTHENTICATION_BACKENDS`), so the password login has a backend of its own; the single sign-on and
break-glass backends (apps.sso.backends) load their users the same way."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from .access.policy import user_with_viewer


class SessionUserMixin:
    """`get_user` of a backend: the user with what it may see, or None (gone, or deactivated)."""

    def get_user(self, user_id: Any) -> User | None:
        user = user_with_viewer(user_id)
        if user is None or not self.user_can_authenticate(user):  # type: ignore[attr-defined]  # a ModelBackend's
            return None
        return user


class PasswordBackend(SessionUserMixin, ModelBackend):
    """The password login (Django's ModelBackend). A refused password stops the login here: sessions logged in
    before this backend existed name Django's ModelBackend, which stays listed after it to load them and must not
    check the same password a second time."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> User | None:
        user = super().authenticate(request, username, password, **kwargs)
        if user is None and password is not None and (username or kwargs.get(User.USERNAME_FIELD)) is not None:
            raise PermissionDenied  # Django sends user_login_failed once, as for any refused login
        return user
