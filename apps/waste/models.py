"""Flags: what a job or a GPU-hour needs a person to look at."""

from __future__ import annotations

from django.db import models

from apps.fleet.models import Cluster, Gpu
from apps.jobs.models import Job


class Flag(models.Model):
    """One finding, on a job, on a GPU-hour, or on a job's GPU-hour; unique per subject and kind."""

    class Kind(models.TextChoices):
        LOW_COVERAGE = "low_coverage"
        MEMORY_HOG = "memory_hog"
        IDLE_ALLOCATION = "idle_allocation"
        COUNTER_RESET = "counter_reset"
        CONSERVATION = "conservation"
        ESTIMATED_INTENSITY = "estimated_intensity"

    class Status(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        DISPUTED = "disputed"
        RESOLVED = "resolved"

    kind = models.CharField(max_length=30, choices=Kind.choices)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="flags")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, null=True, blank=True, related_name="flag_rows")
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, null=True, blank=True, related_name="flags")
    hour = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    evidence = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "cluster", "job", "gpu", "hour"], name="flag_unique_subject", nulls_distinct=False
            )
        ]
        indexes = [models.Index(fields=["kind", "status"], name="flag_kind_status")]  # the audit queue

    def __str__(self) -> str:
        subject = self.job or (f"{self.gpu} {self.hour:%Y-%m-%d %H}:00" if self.gpu and self.hour else "")
        return f"{self.kind}: {subject}"
