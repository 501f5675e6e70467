"""Sending weekly reports exactly once per team and week.

The (team, week) row of WeeklyReport is the claim. A send:
1. builds the report (reads only) unless the row already says `sent` or `sending`;
2. claims the row in one short committed statement, a compare-and-swap from `pending` or `failed` to
   `sending` (with claimed_at, the archived subject, HTML, text, numbers, the recipients and the
   Message-ID stem), so a concurrent or later run cannot claim it too;
3. sends one message per recipient over one SMTP connection;
4. marks the row `sent` (sent_at, delivered addresses).

A run that finds `sent` sends nothing. A run that finds `sending` sends nothing either: either another
worker is sending right now, or one died after handing messages to the relay and before step 4, and
sending again could mail everyone twice. Such a row stays `sending` for an admin to resolve (the
archive and the Django admin show it; the relay's log shows whether the Message-IDs went out): mark it
sent, or send it again from the preview page ("send now" with "again"). `failed` means nothing went
out (the relay could not be reached, or refused every message, or the report could not be built):
the next run tries again.

Call these outside a transaction (the task, the command and the views do): the claim must be
committed before the first message leaves.
"""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import get_connection
from django.core.mail.backends.base import BaseEmailBackend
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from apps.core.metrics import REPORTS_SENT
from apps.core.services import metric_count
from apps.fleet.models import Team
from apps.rollups.selectors import MixedBasisError

from .models import ReportRecipient, WeeklyReport
from .rendering import Rendered, fleet_summary_render, mail_domain, message_build, team_report_render
from .schedule import next_send, week_due, zone
from .selectors import (
    absolute,
    due_teams,
    fleet_summary_build,
    fleet_timezone,
    report_build,
    report_document,
    team_timezone,
)

logger = logging.getLogger(__name__)
Status = WeeklyReport.Status

# The relay answered with an error for this message: it did not take it (definite, unlike a dropped
# connection or a timeout, after which it may have).
REFUSED = (smtplib.SMTPRecipientsRefused, smtplib.SMTPResponseException)


class Outcome(StrEnum):
    SENT = "sent"
    ALREADY_SENT = "already_sent"
    IN_DOUBT = "in_doubt"
    NO_RECIPIENTS = "no_recipients"
    FAILED = "failed"


@dataclass
class SendResult:
    outcome: Outcome
    report: WeeklyReport | None = None
    delivered: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Addressee:
    email: str
    unsubscribe_url: str = ""


def unsubscribe_url(recipient: ReportRecipient) -> str:
    return absolute(reverse("reports:unsubscribe", args=[recipient.token]))


def report_url(report: WeeklyReport | None) -> str:
    return absolute(reverse("reports:report", args=[report.pk]) if report else reverse("reports:archive"))


def _finished(report: WeeklyReport | None, *, force: bool) -> SendResult | None:
    """What a run does with a row that was already claimed: nothing."""
    if report is None or force:
        return None
    if report.status == Status.SENT:
        return SendResult(Outcome.ALREADY_SENT, report)
    if report.status == Status.SENDING:
        logger.warning("Report %s 'sending' since %s: not sent again; for an admin.", report, report.claimed_at)
        return SendResult(Outcome.IN_DOUBT, report)
    return None


def _week_check(week_start: date) -> None:
    if week_start.weekday() != 0:
        raise ValueError(f"{week_start} is not a Monday: a report week starts on Monday.")


def team_addressees(team: Team) -> list[Addressee]:
    return [
        Addressee(r.email, unsubscribe_url(r)) for r in team.report_recipients.filter(active=True).order_by("email")
    ]


def admin_addressees() -> list[Addressee]:
    users = get_user_model().objects.filter(is_staff=True, is_active=True).exclude(email="").order_by("email")
    return [Addressee(email) for email in dict.fromkeys(u.email for u in users)]


def _build_failed(*, team: Team | None, week_start: date, error: str) -> SendResult:
    report, _ = WeeklyReport.objects.get_or_create(team=team, week_start=week_start)
    WeeklyReport.objects.filter(pk=report.pk, status__in=[Status.PENDING, Status.FAILED]).update(
        status=Status.FAILED, error=error
    )
    report.refresh_from_db()
    logger.error("Report %s could not be built: %s", report, error)
    metric_count(metric=REPORTS_SENT, labels=["failed"])
    return SendResult(Outcome.FAILED, report, notes=[error])


def report_send(
    *, team: Team, week_start: date, connection: BaseEmailBackend | None = None, force: bool = False
) -> SendResult:
    """The team's report for the week, to its active recipients, once. `force` (an admin's "send
    again") sends even a row that is `sent` or `sending`."""
    _week_check(week_start)
    done = _finished(WeeklyReport.objects.filter(team=team, week_start=week_start).first(), force=force)
    if done:
        return done
    addressees = team_addressees(team)
    if not addressees:
        return SendResult(Outcome.NO_RECIPIENTS)
    try:
        doc = report_document(report_build(team=team, week_start=week_start))
    except MixedBasisError as exc:
        return _build_failed(team=team, week_start=week_start, error=str(exc))

    def render(report: WeeklyReport, addressee: Addressee | None) -> Rendered:
        return team_report_render(
            doc, report_url=report_url(report), unsubscribe_url=addressee.unsubscribe_url if addressee else ""
        )

    return _send(
        team=team, week_start=week_start, doc=doc, addressees=addressees, render=render, connection=connection,
        force=force,
    )  # fmt: skip


def fleet_summary_send(
    *, week_start: date, connection: BaseEmailBackend | None = None, force: bool = False
) -> SendResult:
    """The fleet-wide summary for the week, to the admins (staff users with an email address), once."""
    _week_check(week_start)
    done = _finished(WeeklyReport.objects.filter(team__isnull=True, week_start=week_start).first(), force=force)
    if done:
        return done
    addressees = admin_addressees()
    if not addressees:
        return SendResult(Outcome.NO_RECIPIENTS)
    doc = report_document(fleet_summary_build(week_start=week_start))

    def render(report: WeeklyReport, addressee: Addressee | None) -> Rendered:
        return fleet_summary_render(doc, report_url=report_url(report))

    return _send(
        team=None, week_start=week_start, doc=doc, addressees=addressees, render=render, connection=connection,
        force=force,
    )  # fmt: skip


def _send(
    *,
    team: Team | None,
    week_start: date,
    doc: dict[str, Any],
    addressees: list[Addressee],
    render: Callable[[WeeklyReport, Addressee | None], Rendered],
    connection: BaseEmailBackend | None,
    force: bool,
) -> SendResult:
    report, _ = WeeklyReport.objects.get_or_create(team=team, week_start=week_start)
    archived = render(report, None)
    now = timezone.now()
    stem = f"fleetwatt.report.{report.pk}.{int(now.timestamp())}"
    domain = mail_domain()
    allowed = [Status.PENDING, Status.FAILED] + ([Status.SENT, Status.SENDING] if force else [])
    # The claim: a compare-and-swap, committed before anything is sent.
    with transaction.atomic():
        claimed = WeeklyReport.objects.filter(pk=report.pk, status__in=allowed).update(
            status=Status.SENDING,
            claimed_at=now,
            time_zone=doc["time_zone"],
            subject=archived.subject,
            html=archived.html,
            text=archived.text,
            data=doc,
            message_id=f"<{stem}@{domain}>",
            recipients=[a.email for a in addressees],
            delivered=[],
            error="",
        )
    report.refresh_from_db()
    if not claimed:  # another run claimed it between our first look and now
        return _finished(report, force=False) or SendResult(Outcome.IN_DOUBT, report)

    backend = connection or get_connection(fail_silently=False)
    try:
        backend.open()
    except (OSError, smtplib.SMTPException) as exc:
        return _report_release(report, error=f"The mail relay could not be reached: {exc!r}")
    key = f"{team.name if team else 'fleet'}/{week_start.isoformat()}"
    delivered: list[str] = []
    refused: list[str] = []
    try:
        for n, addressee in enumerate(addressees):
            message = message_build(
                render(report, addressee),
                to=addressee.email,
                message_id=f"<{stem}.{n}@{domain}>",
                report_key=key,
                unsubscribe_url=addressee.unsubscribe_url,
            )
            try:
                backend.send_messages([message])
            except REFUSED as exc:
                refused.append(f"{addressee.email}: {exc!r}")
                continue
            delivered.append(addressee.email)
    except Exception as exc:  # a dropped connection or a timeout: the relay may have taken the message
        WeeklyReport.objects.filter(pk=report.pk).update(
            delivered=delivered,
            error=f"In doubt: {exc!r} after {len(delivered)} of {len(addressees)} messages were accepted.",
        )
        logger.exception("Report %s is in doubt; left 'sending' for an admin.", report)
        metric_count(metric=REPORTS_SENT, labels=["failed"])  # in doubt, left for an admin: not sent as far as we know
        report.refresh_from_db()
        return SendResult(Outcome.IN_DOUBT, report, len(delivered))
    finally:
        backend.close()
    if not delivered:
        return _report_release(report, error="The relay refused every message: " + "; ".join(refused))
    _report_mark_sent(report=report, delivered=delivered, error="; ".join(refused))
    report.refresh_from_db()
    return SendResult(Outcome.SENT, report, len(delivered), notes=refused)


def _report_release(report: WeeklyReport, *, error: str) -> SendResult:
    """Nothing went out: back to `failed`, for the next run to try again."""
    WeeklyReport.objects.filter(pk=report.pk, status=Status.SENDING).update(status=Status.FAILED, error=error)
    report.refresh_from_db()
    logger.error("Report %s not sent: %s", report, error)
    metric_count(metric=REPORTS_SENT, labels=["failed"])
    return SendResult(Outcome.FAILED, report, notes=[error])


def _report_mark_sent(*, report: WeeklyReport, delivered: list[str], error: str) -> None:
    """The last step of a send. A crash before it leaves the row `sending`: never sent twice."""
    WeeklyReport.objects.filter(pk=report.pk, status=Status.SENDING).update(
        status=Status.SENT, sent_at=timezone.now(), delivered=delivered, error=error, send_count=F("send_count") + 1
    )
    metric_count(metric=REPORTS_SENT, labels=["sent"])


def report_mark_sent_by_admin(*, report: WeeklyReport) -> bool:
    """An admin resolves an in-doubt report after checking the relay's log: it did go out."""
    return bool(
        WeeklyReport.objects.filter(pk=report.pk, status=Status.SENDING).update(
            status=Status.SENT, sent_at=timezone.now(), send_count=F("send_count") + 1
        )
    )


def report_preview(*, team: Team | None, week_start: date) -> tuple[dict[str, Any], Rendered]:
    """The report as it would be sent now, without claiming or sending anything."""
    _week_check(week_start)
    if team is None:
        doc = report_document(fleet_summary_build(week_start=week_start))
        return doc, fleet_summary_render(doc, report_url=report_url(None))
    doc = report_document(report_build(team=team, week_start=week_start))
    return doc, team_report_render(doc, report_url=report_url(None))


def due_week(*, now: datetime, team: Team | None) -> date:
    """The week whose report is due at `now` in the team's time zone (the fleet's for the summary)."""
    tz = zone(team_timezone(team) if team else fleet_timezone())
    return week_due(now=now, tz=tz, weekday=settings.FLEETWATT_REPORT_WEEKDAY, hour=settings.FLEETWATT_REPORT_HOUR)


def next_report(*, now: datetime, team: Team | None) -> tuple[datetime, date]:
    """When the team's (or the fleet summary's) next report goes out, in its time zone, and its week."""
    tz = zone(team_timezone(team) if team else fleet_timezone())
    return next_send(now=now, tz=tz, weekday=settings.FLEETWATT_REPORT_WEEKDAY, hour=settings.FLEETWATT_REPORT_HOUR)


@dataclass
class RunLine:
    label: str
    week_start: date
    outcome: str
    delivered: int = 0


def weekly_reports_send(
    *,
    now: datetime,
    week_start: date | None = None,
    team_name: str | None = None,
    summary: bool = True,
    connection: BaseEmailBackend | None = None,
) -> list[RunLine]:
    """Every team with active recipients gets the report of the week due in its time zone (or of
    `week_start`); then the admins get the fleet summary. Safe to run every hour: what was sent is
    not sent again. One team's failure does not stop the others."""
    teams = due_teams()
    if team_name is not None:
        teams = [t for t in teams if t.name == team_name]
    lines: list[RunLine] = []
    for team in teams:
        week = week_start or due_week(now=now, team=team)
        try:
            result = report_send(team=team, week_start=week, connection=connection)
        except Exception:
            logger.exception("Weekly report of %s for %s failed.", team, week)
            lines.append(RunLine(team.name, week, "error"))
            continue
        lines.append(RunLine(team.name, week, result.outcome, result.delivered))
    if summary and team_name is None:
        week = week_start or due_week(now=now, team=None)
        try:
            result = fleet_summary_send(week_start=week, connection=connection)
            lines.append(RunLine("fleet summary", week, result.outcome, result.delivered))
        except Exception:
            logger.exception("Fleet summary for %s failed.", week)
            lines.append(RunLine("fleet summary", week, "error"))
    return lines


def recipient_unsubscribe(*, token: str) -> ReportRecipient | None:
    """Idempotent: unsubscribing twice is fine."""
    recipient = ReportRecipient.objects.filter(token=token).select_related("team").first()
    if recipient and recipient.active:
        recipient.active = False
        recipient.unsubscribed_at = timezone.now()
        recipient.save(update_fields=["active", "unsubscribed_at"])
    return recipient


def recipient_add(*, team: Team, email: str) -> ReportRecipient:
    """Adds the address, or subscribes it again (same token)."""
    recipient, created = ReportRecipient.objects.get_or_create(team=team, email=email.strip().lower())
    if not created and not recipient.active:
        recipient.active, recipient.unsubscribed_at = True, None
        recipient.save(update_fields=["active", "unsubscribed_at"])
    return recipient


def recipient_remove(*, recipient: ReportRecipient) -> None:
    recipient.delete()
