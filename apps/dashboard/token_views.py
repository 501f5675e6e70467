"""API tokens for finance tools: create (the key is shown once; for FLEETWATT_API_TOKEN_DAYS by default, or another
life, or none), list with last use and expiry, revoke. The one thing finance writes: its own credentials, never the
fleet's data (apps.core.access.policy)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.access.policy import user_sees_all_teams
from apps.core.models import ApiToken
from apps.core.web import params
from apps.core.web.query import bad_query_is_400, text_param

TOKEN_NAME_MAX_CHARS = 100  # ApiToken.name
LIFE_CHOICES_DAYS = (30, 90, 180, 365, 730)  # what the page offers beside the default and "never" (0)
LIFE_MAX_DAYS = 3650


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
    default_days = settings.FLEETWATT_API_TOKEN_DAYS
    if request.method == "POST":
        name = text_param(request.POST, "name", max_length=TOKEN_NAME_MAX_CHARS).strip()
        raw_days = text_param(request.POST, "days") or str(default_days)
        days = params.whole_number(raw_days, name="days", low=0, high=LIFE_MAX_DAYS)
        if name:
            expires_at = timezone.now() + timedelta(days=days) if days else None
            _, new_key = ApiToken.issue(user=user, name=name, expires_at=expires_at)
    choices = sorted({*LIFE_CHOICES_DAYS, default_days} - {0})
    context = {
        "tokens": ApiToken.objects.filter(user=user),
        "new_key": new_key,
        "now": timezone.now(),
        "life_choices": [(days, days == default_days) for days in choices],
        "never_default": default_days == 0,
        "example_month": (timezone.now().date().replace(day=1) - timedelta(days=1)).strftime("%Y-%m"),
    }
    return render(request, "dashboard/tokens.html", context)


@require_POST
@login_required
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    user = _finance_or_admin(request)
    token = get_object_or_404(ApiToken.objects.active(), pk=token_id, user=user)
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    return redirect("dashboard:tokens")
