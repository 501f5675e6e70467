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
    # The costs of its jobs within this one UTC day (Job.first_day = last_day = day), each rounded half-even in
    # the minor unit of its currency and added up: what finance's sums of rounded job costs read instead of those
    # jobs' rows. Empty: not known (a job on the day has no days recorded); the sums then read the rows.
    cost_units = models.BigIntegerField(null=True, blank=True)
    # The minor unit's exponent of those jobs' currencies: empty without any such job, -1 when they differ.
    units_exponent = models.SmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["team_id", "day", "cluster_id"]
        constraints = [models.UniqueConstraint(fields=["team", "cluster", "day"], name="teamday_unique")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.cluster_id} {self.day}"
