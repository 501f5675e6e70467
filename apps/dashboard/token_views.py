"""API tokens for finance tools: create (the key is shown once), list with last use, revoke. The one thing
finance writes: its own credentials, never the fleet's data (apps.core.access)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.access import user_sees_all_teams
from apps.core.models import ApiToken
from apps.core.query import bad_query_is_400, text_param

TOKEN_NAME_MAX_CHARS = 100  # ApiToken.name


def _finance_or_admin(request: HttpRequest) -> User:
    user = request.user
    if not user.is_authenticated or not user_sees_all_teams(user):
        raise PermissionDenied("API tokens are for finance and admins.")
    return user


@require_http_methods(["GET", "HEAD", "POST"])
@bad_query_is_400
@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    user = _finance_or_admin(request)
    new_key = ""
    if request.method == "POST":
        name = text_param(request.POST, "name", max_length=TOKEN_NAME_MAX_CHARS).strip()
        if name:
            _, new_key = ApiToken.issue(user=user, name=name)
    return render(
        request,
        "dashboard/tokens.html",
        {"tokens": ApiToken.objects.filter(user=user), "new_key": new_key},
    )


@require_POST
@login_required
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    user = _finance_or_admin(request)
    token = get_object_or_404(ApiToken.objects.active(), pk=token_id, user=user)
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    return redirect("dashboard:tokens")
