"""API tokens for finance tools: create (the key is shown once), list with last use, revoke."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from apps.core.access import user_sees_all_teams
from apps.core.models import ApiToken


def _finance_or_admin(request: HttpRequest) -> None:
    if not user_sees_all_teams(request.user):
        raise PermissionDenied("API tokens are for finance and admins.")


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    _finance_or_admin(request)
    new_key = ""
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        if name:
            _, new_key = ApiToken.issue(user=request.user, name=name[:100])
    return render(
        request,
        "dashboard/tokens.html",
        {"tokens": ApiToken.objects.filter(user=request.user), "new_key": new_key},
    )


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    _finance_or_admin(request)
    token = get_object_or_404(ApiToken.objects.active(), pk=token_id, user=request.user)
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    return redirect("dashboard:tokens")
