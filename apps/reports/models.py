"""Weekly waste reports: who gets them per team, and every report built and sent (the archive)."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from django.db import models

from apps.core.kept import data_changed
from apps.fleet.models import Team

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser, AnonymousUser


def recipient_token() -> str:
    return secrets.token_urlsafe(32)


class ReportRecipient(models.Model):
    """An address that gets a team's weekly report. The token makes its unsubscribe link work without a
    login; unsubscribing keeps the row (inactive), so a lead can see who left and add them back."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="report_recipients")
    email = models.EmailField()
    active = models.BooleanField(default=True)
    token = models.CharField(max_length=64, unique=True, default=recipient_token, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    unsubscribed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["team__name", "email"]
        constraints = [models.UniqueConstraint(fields=["team", "email"], name="reportrecipient_unique_email")]

    def __str__(self) -> str:
        return f"{self.email} ({self.team}{'' if self.active else ', unsubscribed'})"


class WeeklyReportQuerySet(models.QuerySet["WeeklyReport"]):
    def update(self, **kwargs: Any) -> int:
        """Every change of a report's state (claimed, sent, failed, in doubt) is one of these: the reports list
        kept in the cache (apps.core.page_cache) must show it."""
        updated = super().update(**kwargs)
        if updated:
            data_changed()
        return updated

    def visible_to(self, user: AbstractUser | AnonymousUser) -> WeeklyReportQuerySet:
        """Teams' reports through Team.objects.visible_to; the fleet-wide summary (no team) to admins only."""
        if not user.is_authenticated:
            return self.none()
        teams = self.filter(team__in=Team.objects.visible_to(user))
        if user.is_staff or user.is_superuser:
            return teams | self.filter(team__isnull=True)
        return teams


class WeeklyReport(models.Model):
    """One team's report for one week (Monday to Monday in the team's site's time zone), or, with no
    team, the fleet-wide summary for the admins. Unique per (team, week): the row is the claim that
    makes sending exactly-once (apps.reports.services.report_send)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Not sent yet"
        SENDING = "sending", "Sending (in doubt if it stays: check the relay's log for its Message-ID)"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed before anything was sent (retried)"

    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="weekly_reports",
        help_text="Empty: the fleet-wide summary for the admins.",
    )  # fmt: skip
    week_start = models.DateField(help_text="Monday the week began, in the site's time zone.")
    time_zone = models.CharField(max_length=64, default="UTC")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    subject = models.CharField(max_length=300, blank=True)
    html = models.TextField(blank=True, help_text="The HTML part as archived (without a recipient's unsubscribe).")
    text = models.TextField(blank=True, help_text="The plain-text part as archived.")
    data = models.JSONField(default=dict, blank=True, help_text="The report's numbers when it was sent.")
    message_id = models.CharField(max_length=200, blank=True, help_text="Stem of every recipient's Message-ID.")
    recipients = models.JSONField(default=list, blank=True, help_text="Addresses the claimed send was for.")
    delivered = models.JSONField(default=list, blank=True, help_text="Addresses the relay accepted.")
    send_count = models.PositiveIntegerField(default=0, help_text="Completed sends (more than 1: an admin resent).")
    error = models.TextField(blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WeeklyReportQuerySet.as_manager()

    class Meta:
        ordering = ["-week_start", "team__name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "week_start"], name="weeklyreport_unique_week", nulls_distinct=False
            )
        ]
        indexes = [
            # The archive page and /api/reports/?status=: reports in doubt for the admins.
            models.Index(fields=["status", "week_start"], name="weeklyreport_status_week"),
        ]

    def __str__(self) -> str:
        return f"{self.team or 'fleet'} week of {self.week_start:%Y-%m-%d} ({self.status})"

    @property
    def in_doubt(self) -> bool:
        return self.status == self.Status.SENDING
