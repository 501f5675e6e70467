"""Stored sums that rollups read instead of the job rows."""

from __future__ import annotations

from django.db import models


class TeamDay(models.Model):
    """A team's jobs on one cluster and one UTC day, summed: what team rollups read, so a year is a few
    hundred rows however many jobs it holds. Rebuilt from the job-GPU-hour rows for every day an
    ingest, a footprint refresh or an audit decision touches; jobs excluded from their team's bill
    are left out."""

    team = models.ForeignKey("fleet.Team", on_delete=models.CASCADE, related_name="days")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="team_days")
    day = models.DateField()
    energy_j = models.FloatField(default=0.0)
    occupancy_s = models.FloatField(default=0.0)
    facility_kwh = models.FloatField(default=0.0)
    operational_kg = models.FloatField(default=0.0)
    embodied_kg = models.FloatField(default=0.0)
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)
    energy_by_method_j = models.JSONField(default=dict)

    class Meta:
        ordering = ["team_id", "day", "cluster_id"]
        constraints = [models.UniqueConstraint(fields=["team", "cluster", "day"], name="teamday_unique")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.cluster_id} {self.day}"
