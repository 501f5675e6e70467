"""Flags: what a job or a GPU-hour needs a person to look at."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from apps.fleet.models import Cluster, Gpu, team_scoped
from apps.jobs.models import Job

from .kinds import KIND_CHOICES, STATUS_CHOICES, FlagKind, FlagStatus


class FlagQuerySet(models.QuerySet["Flag"]):
    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> FlagQuerySet:
        """Findings on jobs of the teams the user may see; GPU-hour findings (no job) to admins and finance.
        Scoped by team, not by `job__in=<the user's jobs>`: that subquery hashes every job of the team."""
        return team_scoped(self, user, team_path="job__team")


class Flag(models.Model):
    """One finding, on a job, on a GPU-hour, or on a job's GPU-hour; unique per subject and kind."""

    Kind = FlagKind  # so callers write Flag.Kind.MEMORY_HOG
    Status = FlagStatus

    kind = models.CharField(max_length=30, choices=KIND_CHOICES)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="flags")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, null=True, blank=True, related_name="flag_rows")
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, null=True, blank=True, related_name="flags")
    hour = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=FlagStatus.OPEN)
    evidence = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = FlagQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "cluster", "job", "gpu", "hour"], name="flag_unique_subject", nulls_distinct=False
            )
        ]
        indexes = [
            models.Index(fields=["kind", "status"], name="flag_kind_status"),  # the audit queue
            models.Index(fields=["-created_at", "-id"], name="flag_newest_first"),  # the API's pages
        ]

    def __str__(self) -> str:
        subject = self.job or (f"{self.gpu} {self.hour:%Y-%m-%d %H}:00" if self.gpu and self.hour else "")
        return f"{self.kind}: {subject}"


class AuditEntry(models.Model):
    """One admin decision on a finding or a job: who, when, what, the values before and after, why.

    Append-only: the database refuses UPDATE and DELETE on this table (a trigger, see the migration),
    so neither the admin nor a raw statement can rewrite history. (TRUNCATE, like DROP, stays with
    the database's owner, and the test suite's flush needs it.)"""

    class Action(models.TextChoices):
        ACKNOWLEDGE = "acknowledge"
        DISPUTE = "dispute"
        EXCLUDE = "exclude"
        INCLUDE = "include"
        REASSIGN_TEAM = "reassign_team"
        REASSIGN_GROUP = "reassign_group"

    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="audit_entries")
    action = models.CharField(max_length=20, choices=Action.choices)
    # The subject: a job, or the GPU-hour of a finding on the meter's figures (a counter reset, a sum that
    # does not add up), which no job carries.
    job = models.ForeignKey(Job, on_delete=models.PROTECT, null=True, blank=True, related_name="audit_entries")
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, null=True, blank=True, related_name="audit_entries")
    hour = models.DateTimeField(null=True, blank=True)
    # The flag by id, not by foreign key: a withdrawn flag must not rewrite (SET NULL) an entry.
    flag_id = models.BigIntegerField(null=True, blank=True)
    flag_kind = models.CharField(max_length=30, blank=True)
    reason = models.TextField()
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["job", "at"], name="audit_job_at"),  # a job's trail
            # The log's pages, newest first by a cursor: without it every page joined and sorted the whole log.
            models.Index(fields=["-at", "-id"], name="audit_newest_first"),
            # The audit queue's rows: each finding's last decision (who, when, why), for a page of findings at once.
            models.Index(fields=["flag_id", "-at", "-id"], name="audit_flag_at"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(job__isnull=False) | models.Q(gpu__isnull=False, hour__isnull=False),
                name="audit_entry_has_subject",
            )
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.subject}"

    @property
    def subject(self) -> str:
        """The job's key, or "GPU <uuid> at <hour>" for a decision on a GPU-hour's finding."""
        if self.job_id is not None:
            return self.job.job_key if self.job else str(self.job_id)
        return f"GPU {self.gpu.uuid if self.gpu else self.gpu_id} at {self.hour:%Y-%m-%d %H}:00 UTC"
