"""Pages: the reports archive and a report in the browser (the team's members, finance, admins); the
admins' preview and "send now"; recipients kept by a team's leads and admins; unsubscribe (no login)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from apps.core.access.policy import user_is_read_only
from apps.core.web import params
from apps.core.web.query import bad_query_is_400, date_param, filters_checked, id_param, text_param
from apps.fleet.models import Team, TeamMembership
from apps.rollups.selectors import MixedBasisError

from .filtersets import WeeklyReportFilterSet
from .models import ReportRecipient, WeeklyReport
from .schedule import week_monday
from .services import (
    Outcome,
    due_week,
    fleet_summary_send,
    next_report,
    recipient_add,
    recipient_remove,
    recipient_unsubscribe,
    report_mark_sent_by_admin,
    report_preview,
    report_send,
)


def _staff_only(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("Only admins preview and send reports.")


def _can_manage(user: User | AnonymousUser, team: Team) -> bool:
    """A team's leads and the admins keep its recipients; finance only reads, a lead's team included."""
    if user.is_staff:
        return True
    return (
        user.is_authenticated
        and not user_is_read_only(user)
        and TeamMembership.objects.filter(user=user, team=team, role=TeamMembership.Role.LEAD).exists()
    )


@require_safe
@bad_query_is_400
@login_required
def archive(request: HttpRequest) -> HttpResponse:
    teams = Team.objects.visible_to(request.user).order_by("name")
    filterset = WeeklyReportFilterSet(
        request.GET, queryset=WeeklyReport.objects.visible_to(request.user).select_related("team")
    )
    filters_checked(filterset)
    reports = filterset.qs
    team_name = text_param(request.GET, "team")
    manageable = [t for t in teams if _can_manage(request.user, t)]
    context = {
        "reports": reports.order_by("-week_start", "team__name", "id")[:200],
        "teams": teams,
        "team_name": team_name,
        "manageable": manageable,
        "in_doubt": reports.filter(status=WeeklyReport.Status.SENDING).count(),
    }
    return render(request, "reports/archive.html", context)


@require_safe
@login_required
def report(request: HttpRequest, report_id: int) -> HttpResponse:
    report = get_object_or_404(WeeklyReport.objects.visible_to(request.user).select_related("team"), pk=report_id)
    return render(request, "reports/report.html", {"report": report, "doc": report.data})


def _preview_target(request: HttpRequest) -> tuple[Team | None, date]:
    """`team` (an id; none: the fleet summary, for admins; anyone else their first team) and `week` (a day
    of it; none: the week due now), strictly: QueryError (400) for what is neither. A team the viewer may
    not see is not found."""
    source = request.POST if request.method == "POST" else request.GET
    team_id = id_param(source, "team")
    teams = Team.objects.visible_to(request.user).order_by("name")
    if team_id is not None:
        team: Team | None = get_object_or_404(teams, pk=team_id)
    elif request.user.is_staff:
        team = None
    else:
        team = teams.first()
        if team is None:
            raise PermissionDenied("Reports are a team's: you are in no team.")
    day = date_param(source, "week")
    return team, week_monday(day) if day is not None else due_week(now=timezone.now(), team=team)


@require_safe
@bad_query_is_400
@login_required
def preview(request: HttpRequest) -> HttpResponse:
    """A report as it would go out now (nothing claimed, nothing sent), when the next one goes out and to
    whom: a team's to those who see the team (its recipients' addresses to those who keep them), the fleet
    summary and "send now" to admins."""
    team, week = _preview_target(request)
    existing = WeeklyReport.objects.filter(team=team, week_start=week).first()
    recipients = team.report_recipients.filter(active=True).order_by("email") if team else None
    addresses_shown = team is None or _can_manage(request.user, team)
    next_at, next_week = next_report(now=timezone.now(), team=team)
    context: dict[str, Any] = {
        "teams": Team.objects.visible_to(request.user).order_by("name"),
        "team": team,
        "week": week,
        "existing": existing,
        "recipients": recipients if addresses_shown else None,
        # only where the addresses are not shown: the page says how many instead
        "recipients_count": None if addresses_shown or recipients is None else recipients.count(),
        "next_at": next_at,
        "next_week": next_week,
        "may_send": request.user.is_staff,
    }
    try:
        context["doc"], context["rendered"] = report_preview(team=team, week_start=week)
    except MixedBasisError as exc:
        context["error"] = str(exc)
    return render(request, "reports/preview.html", context)


@require_POST
@bad_query_is_400
@login_required
def send_now(request: HttpRequest) -> HttpResponse:
    """Sends the report of a team (or the fleet summary) for a week; `again` resends one that is sent
    or in doubt (the admin's decision)."""
    _staff_only(request)
    team, week = _preview_target(request)
    again = request.POST.get("again") == "1"
    if team is None:
        result = fleet_summary_send(week_start=week, force=again)
    else:
        result = report_send(team=team, week_start=week, force=again)
    text = {
        Outcome.SENT: f"Sent to {result.delivered} recipient(s).",
        Outcome.ALREADY_SENT: "Already sent: tick 'send again' to resend it.",
        Outcome.IN_DOUBT: "In doubt (a send never recorded its end): check the relay's log, then mark it sent or "
        "send again.",
        Outcome.NO_RECIPIENTS: "Nobody to send it to: add recipients first.",
        Outcome.FAILED: "Not sent: " + "; ".join(result.notes),
    }[result.outcome]
    level = messages.SUCCESS if result.outcome == Outcome.SENT else messages.WARNING
    messages.add_message(request, level, text)
    if result.report is not None:
        return redirect("reports:report", report_id=result.report.pk)
    query = f"?week={week.isoformat()}" + (f"&team={team.pk}" if team else "")
    return redirect(reverse("reports:preview") + query)


@require_POST
@login_required
def resolve(request: HttpRequest, report_id: int) -> HttpResponse:
    """An admin marks an in-doubt report as sent, having seen its Message-IDs in the relay's log."""
    _staff_only(request)
    report = get_object_or_404(WeeklyReport, pk=report_id)
    if report_mark_sent_by_admin(report=report):
        messages.success(request, "Marked as sent.")
    else:
        messages.warning(request, "Only a report in doubt ('sending') can be marked as sent.")
    return redirect("reports:report", report_id=report.pk)


@require_http_methods(["GET", "HEAD", "POST"])
@bad_query_is_400
@login_required
def recipients(request: HttpRequest, team_id: int) -> HttpResponse:
    team = get_object_or_404(Team.objects.visible_to(request.user), pk=team_id)
    if not _can_manage(request.user, team):
        raise PermissionDenied("A team's leads and the admins keep its recipients.")
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "add":
            email = (request.POST.get("email") or "").strip()
            try:
                validate_email(email)
            except ValidationError:
                messages.error(request, f"{email!r} is not an email address.")
            else:
                recipient_add(team=team, email=email)
                messages.success(request, f"{email} gets the weekly report.")
        elif action == "remove":
            recipient = get_object_or_404(ReportRecipient, team=team, pk=id_param(request.POST, "recipient") or 0)
            recipient_remove(recipient=recipient)
            messages.success(request, f"{recipient.email} removed.")
        return redirect("reports:recipients", team_id=team.pk)
    context = {"team": team, "recipients": team.report_recipients.order_by("email")}
    return render(request, "reports/recipients.html", context)


@csrf_exempt  # the token in the URL is the authority; mail clients POST here without a form (RFC 8058)
@require_http_methods(["GET", "POST"])
@bad_query_is_400
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks to confirm (link scanners must not unsubscribe anyone); POST unsubscribes."""
    params.text(token, name="token")
    recipient = ReportRecipient.objects.filter(token=token).select_related("team").first()
    if recipient is None:
        raise Http404("This unsubscribe link is not valid.")
    if request.method == "POST":
        recipient = recipient_unsubscribe(token=token)
        return render(request, "reports/unsubscribe.html", {"recipient": recipient, "done": True})
    return render(request, "reports/unsubscribe.html", {"recipient": recipient, "done": False})
