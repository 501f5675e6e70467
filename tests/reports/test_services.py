"""Sending weekly reports exactly once (apps/reports/services.py): the row claimed before the first message leaves, a
`sending` row never sent again but by an admin, nothing claimed when nothing went out, a refused address not stopping
the others; recipients added, unsubscribed and removed. Sent through Django's in-memory mail backend (and backends
that fail on purpose); over real SMTP: tests/reports/test_weekly_email.py."""

from __future__ import annotations

import smtplib
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.mail import EmailMessage, get_connection
from django.core.mail.backends.locmem import EmailBackend

from apps.fleet.models import Team
from apps.reports.models import ReportRecipient, WeeklyReport
from apps.reports.services import (
    Outcome,
    admin_addressees,
    fleet_summary_send,
    recipient_add,
    recipient_remove,
    recipient_unsubscribe,
    report_mark_sent_by_admin,
    report_preview,
    report_send,
    weekly_reports_send,
)
from tests.carbon.fleet_builder import fleet_build

from .conftest import WEEK

pytestmark = pytest.mark.django_db

Status = WeeklyReport.Status


class Refusing(EmailBackend):
    """Takes every message but those to the addresses it refuses."""

    refuse: frozenset[str] = frozenset()

    def send_messages(self, messages: Sequence[EmailMessage]) -> int:
        for m in messages:
            if m.to[0] in self.refuse:
                raise smtplib.SMTPRecipientsRefused({m.to[0]: (550, b"no such user")})
        return super().send_messages(messages)


class Dropping(EmailBackend):
    """Takes the first message, then the connection drops (the relay may have taken the second)."""

    def send_messages(self, messages: Sequence[EmailMessage]) -> int:
        if mail.outbox:
            raise ConnectionResetError("connection reset by peer")
        return super().send_messages(messages)


class Unreachable(EmailBackend):
    def open(self) -> bool:
        raise ConnectionRefusedError("no relay")


@pytest.fixture
def team(settings: Any) -> Team:
    settings.FLEETWATT_BASE_URL = "https://fleetwatt.example.org"
    team = fleet_build(servers=1, gpus_per_server=1).team
    for address in ("ada@example.org", "lin@example.org"):
        ReportRecipient.objects.create(team=team, email=address)
    ReportRecipient.objects.create(team=team, email="gone@example.org", active=False)
    return team


def _locmem() -> EmailBackend:
    return get_connection("django.core.mail.backends.locmem.EmailBackend")


def _row(team: Team | None) -> WeeklyReport:
    return WeeklyReport.objects.get(team=team, week_start=WEEK)


def test_a_report_goes_once_to_each_active_recipient_and_a_second_run_sends_nothing(team: Team) -> None:
    # when
    first = report_send(team=team, week_start=WEEK, connection=_locmem())
    # then
    assert (first.outcome, first.delivered) == (Outcome.SENT, 2)
    assert sorted(m.to[0] for m in mail.outbox) == ["ada@example.org", "lin@example.org"]
    row = _row(team)
    assert (row.status, row.send_count, row.delivered) == (Status.SENT, 1, ["ada@example.org", "lin@example.org"])
    assert row.subject == mail.outbox[0].subject and row.data["team_name"] == team.name
    assert len({m.extra_headers["Message-ID"] for m in mail.outbox}) == 2
    # when run again
    again = report_send(team=team, week_start=WEEK, connection=_locmem())
    # then
    assert again.outcome == Outcome.ALREADY_SENT and len(mail.outbox) == 2


def test_an_admins_send_again_sends_a_sent_report_once_more(team: Team) -> None:
    report_send(team=team, week_start=WEEK, connection=_locmem())
    forced = report_send(team=team, week_start=WEEK, connection=_locmem(), force=True)
    assert forced.outcome == Outcome.SENT and len(mail.outbox) == 4 and _row(team).send_count == 2


def test_a_report_being_sent_is_not_sent_again_but_an_admin_may_mark_it_sent(team: Team) -> None:
    WeeklyReport.objects.create(team=team, week_start=WEEK, status=Status.SENDING)
    result = report_send(team=team, week_start=WEEK, connection=_locmem())
    assert result.outcome == Outcome.IN_DOUBT and mail.outbox == []
    assert report_mark_sent_by_admin(report=_row(team))
    assert (_row(team).status, _row(team).send_count) == (Status.SENT, 1)
    assert not report_mark_sent_by_admin(report=_row(team))  # only from `sending`


def test_a_refused_address_does_not_stop_the_others(team: Team) -> None:
    backend = Refusing()
    backend.refuse = frozenset({"ada@example.org"})
    result = report_send(team=team, week_start=WEEK, connection=backend)
    assert (result.outcome, result.delivered) == (Outcome.SENT, 1)
    assert _row(team).delivered == ["lin@example.org"] and "ada@example.org" in _row(team).error


def test_when_every_address_is_refused_or_the_relay_is_down_nothing_is_claimed(team: Team) -> None:
    backend = Refusing()
    backend.refuse = frozenset({"ada@example.org", "lin@example.org"})
    refused = report_send(team=team, week_start=WEEK, connection=backend)
    assert refused.outcome == Outcome.FAILED and _row(team).status == Status.FAILED
    down = report_send(team=team, week_start=WEEK, connection=Unreachable())
    assert down.outcome == Outcome.FAILED and "could not be reached" in _row(team).error
    # the next run sends
    assert report_send(team=team, week_start=WEEK, connection=_locmem()).outcome == Outcome.SENT


def test_a_connection_lost_mid_send_leaves_the_report_in_doubt_for_an_admin(team: Team) -> None:
    result = report_send(team=team, week_start=WEEK, connection=Dropping())
    assert (result.outcome, result.delivered) == (Outcome.IN_DOUBT, 1)
    row = _row(team)
    assert row.status == Status.SENDING and row.delivered == ["ada@example.org"]
    assert row.error.startswith("In doubt: ConnectionResetError")
    # the next run does not mail everyone again
    assert report_send(team=team, week_start=WEEK, connection=_locmem()).outcome == Outcome.IN_DOUBT
    assert len(mail.outbox) == 1


def test_a_week_that_does_not_start_on_monday_or_a_team_without_recipients_writes_nothing(team: Team) -> None:
    with pytest.raises(ValueError, match="is not a Monday"):
        report_send(team=team, week_start=date(2026, 11, 3), connection=_locmem())
    assert report_send(team=Team.objects.create(name="quiet"), week_start=WEEK).outcome == Outcome.NO_RECIPIENTS
    assert not WeeklyReport.objects.exists() and mail.outbox == []


def test_the_preview_sends_and_claims_nothing(team: Team) -> None:
    doc, rendered = report_preview(team=team, week_start=WEEK)
    assert doc["team_name"] == team.name and rendered.subject.startswith("fleetwatt weekly report:")
    fleet_doc, fleet = report_preview(team=None, week_start=WEEK)
    assert fleet.subject.startswith("fleetwatt fleet summary") and "teams" in fleet_doc
    assert not WeeklyReport.objects.exists() and mail.outbox == []


def test_the_fleet_summary_goes_to_each_admins_address_once(team: Team) -> None:
    User.objects.create_user("boss", email="boss@example.org", is_staff=True)
    User.objects.create_user("boss2", email="boss@example.org", is_staff=True)
    User.objects.create_user("gone", email="gone@example.org", is_staff=True, is_active=False)
    User.objects.create_user("ada", email="ada@example.org")
    User.objects.create_user("nomail", email="", is_staff=True)
    assert [a.email for a in admin_addressees()] == ["boss@example.org"]
    result = fleet_summary_send(week_start=WEEK, connection=_locmem())
    assert (result.outcome, [m.to for m in mail.outbox]) == (Outcome.SENT, [["boss@example.org"]])
    assert "List-Unsubscribe" not in mail.outbox[0].extra_headers
    assert _row(None).status == Status.SENT


def test_a_run_sends_each_teams_report_and_the_summary(team: Team, settings: Any) -> None:
    settings.FLEETWATT_REPORT_WEEKDAY, settings.FLEETWATT_REPORT_HOUR = 0, 7
    User.objects.create_user("boss", email="boss@example.org", is_staff=True)
    now = datetime(2026, 11, 9, 8, tzinfo=UTC)  # Monday 08:00 UTC: the week of 2 November is due
    lines = weekly_reports_send(now=now, connection=_locmem())
    assert [(line.label, line.week_start, line.outcome, line.delivered) for line in lines] == [
        (team.name, WEEK, "sent", 2), ("fleet summary", WEEK, "sent", 1)
    ]  # fmt: skip
    only = weekly_reports_send(now=now, week_start=WEEK, team_name=team.name, connection=_locmem())
    assert [(line.label, line.outcome) for line in only] == [(team.name, "already_sent")]


# recipients


def test_a_recipient_added_twice_is_one_and_comes_back_with_the_same_token(team: Team) -> None:
    added = recipient_add(team=team, email="  New@Example.org ")
    assert added.email == "new@example.org" and added.active
    assert recipient_unsubscribe(token=added.token) == added
    again = recipient_unsubscribe(token=added.token)  # twice is fine
    assert again is not None and not again.active and again.unsubscribed_at is not None
    back = recipient_add(team=team, email="new@example.org")
    assert (back.pk, back.token, back.active, back.unsubscribed_at) == (added.pk, added.token, True, None)
    assert recipient_unsubscribe(token="no-such-token") is None
    recipient_remove(recipient=back)
    assert not ReportRecipient.objects.filter(email="new@example.org").exists()
