"""Stored sums that rollups read instead of the job rows: per UTC day, a team's, a cluster's and a job group's, each
GPU's, each job's, and a team's waste."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import models

from apps.core.units.footprint import Footprint


class DaySums(models.Model):
    """Jobs' footprints on one UTC day, summed (each job's rows summed exactly first, then the jobs), with the
    rounded costs of the jobs within that one day: what rollups of whole days read, so a year is a few hundred
    rows however many jobs it holds. Rebuilt from the job-GPU-hour rows for every day an ingest, a footprint
    refresh, an audit decision or a job's new group touches (apps.rollups.services.day_sums_refresh)."""

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
    # The interval of energy_j (docs/accuracy.md, "Sums"): its rows' lows and highs added up, exact rows (one job
    # on its GPU) as they are (apps.rollups.bands); equal to energy_j where every row is exact. Empty: not known (a
    # day stored before these columns whose hour rows were past retention when they were filled in).
    energy_low_j = models.FloatField(null=True, blank=True)
    energy_high_j = models.FloatField(null=True, blank=True)

    class Meta:
        abstract = True


class TeamDay(DaySums):
    """A team's jobs on one cluster and one UTC day: what team rollups read. Jobs excluded from their team's
    bill are left out."""

    team = models.ForeignKey("fleet.Team", on_delete=models.CASCADE, related_name="days")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="team_days")

    class Meta:
        ordering = ["team_id", "day", "cluster_id"]
        constraints = [models.UniqueConstraint(fields=["team", "cluster", "day"], name="teamday_unique")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.cluster_id} {self.day}"


class ClusterDay(DaySums):
    """A cluster's jobs (all of them: a cluster's rollup bills nobody) and its GPU-hours' sums on one UTC day:
    what cluster rollups of whole days read; the idle line is worked out from the GPU-hours' sums per period
    (apps.rollups.selectors._idle_footprint), as from the GPU-hour rows, with the part of it nobody saw."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="days")
    device_j = models.FloatField(default=0.0)
    jobs_j = models.FloatField(default=0.0)
    estimated_j = models.FloatField(default=0.0)
    gpu_hours_total = models.IntegerField(default=0, help_text="GPU-hour rows: 0, no idle line that day.")
    occupied_s = models.FloatField(default=0.0)
    estimated_s = models.FloatField(default=0.0)
    idle_facility_kwh = models.FloatField(default=0.0)
    idle_operational_kg = models.FloatField(default=0.0)
    idle_embodied_kg = models.FloatField(default=0.0)
    idle_cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)
    # The part of the idle line nobody saw (the GPU-hours' unseen_* summed): within the idle figures.
    unseen_j = models.FloatField(default=0.0, db_default=0.0)
    unseen_s = models.FloatField(default=0.0, db_default=0.0)
    unseen_facility_kwh = models.FloatField(default=0.0, db_default=0.0)
    unseen_operational_kg = models.FloatField(default=0.0, db_default=0.0)
    unseen_embodied_kg = models.FloatField(default=0.0, db_default=0.0)
    unseen_cost = models.DecimalField(max_digits=18, decimal_places=6, default=0, db_default=0)

    class Meta:
        ordering = ["cluster_id", "day"]
        constraints = [models.UniqueConstraint(fields=["cluster", "day"], name="clusterday_unique")]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.day}"


class JobGroupDay(DaySums):
    """A job group's jobs on one cluster and one UTC day (all of them, failed and abandoned runs included): what
    job group rollups of whole days read."""

    job_group = models.ForeignKey("carbon.JobGroup", on_delete=models.CASCADE, related_name="days")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="job_group_days")

    class Meta:
        ordering = ["job_group_id", "day", "cluster_id"]
        constraints = [models.UniqueConstraint(fields=["job_group", "cluster", "day"], name="jobgroupday_unique")]

    def __str__(self) -> str:
        return f"{self.job_group_id} {self.cluster_id} {self.day}"


class TeamWasteDay(models.Model):
    """A team's waste on one UTC day, counted once (apps.waste.selectors.period_waste: its counted findings' rows
    on that day, a GPU-hour two findings share once): what team rollups of whole days read instead of every
    finding of the period. Rebuilt for every team and day a derivation touches: new rows or findings of its jobs
    (every day of those jobs: a finding is about the job's whole run), a decision on a finding, a job moved out
    of a team's bill or to another team (apps.rollups.services.team_waste_days_refresh). A day without waste has
    no row."""

    team = models.ForeignKey("fleet.Team", on_delete=models.CASCADE, related_name="waste_days", db_index=False)
    day = models.DateField()
    # A Footprint's fields as period_waste sums them (floats to their last bit: the rollup adds these as it added them).
    energy_j = models.FloatField(default=0.0)
    gpu_hours = models.FloatField(default=0.0)
    server_kwh = models.FloatField(default=0.0)
    facility_kwh = models.FloatField(default=0.0)
    operational_kg = models.FloatField(null=True, blank=True)
    embodied_kg = models.FloatField(default=0.0)
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)

    class Meta:
        ordering = ["team_id", "day"]
        constraints = [models.UniqueConstraint(fields=["team", "day"], name="teamwasteday_unique")]

    def __str__(self) -> str:
        return f"{self.team_id} {self.day}"

    def footprint(self) -> Footprint:
        """The day's waste as the Footprint period_waste gave for it."""
        return Footprint(
            energy_j=self.energy_j, gpu_hours=self.gpu_hours, server_kwh=self.server_kwh,
            facility_kwh=self.facility_kwh, operational_kg=self.operational_kg, embodied_kg=self.embodied_kg,
            cost=self.cost,
        )  # fmt: skip


class ExactSumField(models.DecimalField):
    """A sum of float columns kept exact: Postgres's `numeric` without precision or scale, as
    apps.core.units.aggregates sums floats (each cast to numeric, then added), so that sums of these sums are the sums
    of the rows themselves, to the last bit once read back as floats."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["max_digits"], kwargs["decimal_places"] = None, None
        super().__init__(*args, **kwargs)

    def check(self, **kwargs: Any) -> list[Any]:
        return []  # (no digits nor places to check: unbounded)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("max_digits", None)
        kwargs.pop("decimal_places", None)
        return name, path, args, kwargs

    def db_type(self, connection: Any) -> str:
        return "numeric"


class JobDay(models.Model):
    """A job's part of one UTC day on one cluster: its job-GPU-hour rows of that day summed exactly (numeric, not
    rounded to floats), with its team and its lines in the team's splits: what a team's page and its job list read
    for each job's part of a period of whole days (apps.rollups.team_parts) instead of the period's rows of every job
    (a team's month is thousands of jobs among the fleet's hundreds of thousands of rows). Each job's days added up in
    the database are its rows' sums, to the last bit of each float (jobs_in_period_footprints' figures); a job within
    one day is its day, with its booked cost, so the splits add such jobs up as rows, without summing each job first.
    Rebuilt with its cluster's daily sums (apps.rollups.services.day_sums_refresh), so a job charged to another team
    or group or excluded from a bill moves with them; the days of hour rows past retention go with those rows
    (apps.telemetry.partitions.hour_rows_expire), their costs then read from ExpiredJobDay as before."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="day_parts", db_index=False)
    # (the job's team when summed: its day sums follow a move, as TeamDay's)
    team = models.ForeignKey("fleet.Team", on_delete=models.CASCADE, related_name="job_days", db_index=False)
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="job_days", db_index=False)
    day = models.DateField()
    # The job's lines in its team's splits (by user, by job group), as they were when summed: every change of them
    # sums its days again (a move to another team or group, an exclusion, a new currency, a user's name, its days).
    user = models.CharField(max_length=255, blank=True)
    job_group = models.ForeignKey(
        "carbon.JobGroup", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    billed = models.BooleanField(default=True, help_text="On its team's bill (not excluded by an admin).")
    currency = models.CharField(max_length=3, blank=True)
    within_day = models.BooleanField(default=False, help_text="The job's only day: all of its rows are on it.")
    # Where within_day: the job's whole cost rounded half-even in its currency, as the bill books it.
    cost_booked = ExactSumField(null=True, blank=True)
    energy_j = ExactSumField(default=0)
    occupancy_s = ExactSumField(default=0)
    server_kwh = ExactSumField(default=0)
    facility_kwh = ExactSumField(default=0)
    operational_kg = ExactSumField(null=True, blank=True)  # empty: no row of the day had a grid intensity
    embodied_kg = ExactSumField(default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)

    class Meta:
        ordering = ["team_id", "day", "job_id"]
        constraints = [
            # (its index: the days a derivation deletes and sums again, by cluster and day)
            models.UniqueConstraint(fields=["cluster", "day", "job"], name="jobday_unique"),
        ]
        indexes = [
            # A team's page and its job list: the team's jobs' parts of a period's days.
            models.Index(fields=["team", "day"], name="jobday_team_day"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} {self.cluster_id} {self.day}"


class TeamLineDay(models.Model):
    """A team's jobs within one UTC day on one cluster (those on its bill whose only day it is: JobDay.within_day),
    added up per line of the team's splits (its user, its job group) and currency: how many, their booked costs (each
    rounded on its own) and their rows' sums, exact. What a team's page adds up for such jobs of a period's whole days
    (a month's thousands of jobs, a few hundred lines); the jobs across days, and those seen with no row, are added up
    from their own days (apps.rollups.team_parts). Rebuilt with the jobs' days (apps.rollups.services.day_sums_refresh),
    gone with them past retention."""

    team = models.ForeignKey("fleet.Team", on_delete=models.CASCADE, related_name="line_days", db_index=False)
    cluster = models.ForeignKey(
        "fleet.Cluster", on_delete=models.CASCADE, related_name="team_line_days", db_index=False
    )
    day = models.DateField()
    user = models.CharField(max_length=255, blank=True)
    job_group = models.ForeignKey(
        "carbon.JobGroup", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    currency = models.CharField(max_length=3, blank=True)
    jobs = models.IntegerField(default=0)
    cost_booked = ExactSumField(default=0)  # the jobs' costs, each rounded half-even in its currency, added up
    energy_j = ExactSumField(default=0)
    occupancy_s = ExactSumField(default=0)
    server_kwh = ExactSumField(default=0)
    facility_kwh = ExactSumField(default=0)
    operational_kg = ExactSumField(null=True, blank=True)
    embodied_kg = ExactSumField(default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)

    class Meta:
        ordering = ["team_id", "day", "user"]
        constraints = [
            # (its index: the days a derivation deletes and sums again, by cluster and day)
            models.UniqueConstraint(
                fields=["cluster", "day", "team", "user", "job_group", "currency"], nulls_distinct=False,
                name="teamlineday_unique",
            ),
        ]  # fmt: skip
        indexes = [
            # A team's page: its lines of a period's days.
            models.Index(fields=["team", "day"], name="teamlineday_team_day"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id} {self.cluster_id} {self.day} {self.user} {self.job_group_id}"


class GpuDay(models.Model):
    """A GPU's GPU-hours on one UTC day, summed: what the GPU list (`/api/gpus/`) reads for the whole days of its
    period instead of the GPU-hour rows (a year of 1,000 GPUs is 8.8 million rows, 365,000 days). Rebuilt with its
    cluster's daily sums (apps.rollups.services.day_sums_refresh); the days of hour rows past retention go with
    them (apps.telemetry.partitions.hour_rows_expire)."""

    # (no index of its own: the unique (gpu, day) serves a GPU's lookups)
    gpu = models.ForeignKey("fleet.Gpu", on_delete=models.CASCADE, related_name="days", db_index=False)
    day = models.DateField()
    hours = models.IntegerField(default=0, help_text="GPU-hour rows of the day.")
    device_energy_j = models.FloatField(default=0.0)
    jobs_energy_j = models.FloatField(default=0.0)
    idle_energy_j = models.FloatField(default=0.0)
    unobserved_j = models.FloatField(default=0.0)
    estimated_j = models.FloatField(default=0.0)
    occupied_s = models.FloatField(default=0.0)
    estimated_s = models.FloatField(default=0.0)
    # Each of its GPU-hours as it is: its hour of the day (UTC, 0-23) and its device energy and occupied seconds, in
    # the order of the hours: the fleet page's heatmap of a week of hours reads these instead of the GPU-hour rows.
    # (empty by default in the database too: a worker of the release before writes days without them)
    hours_of_day = ArrayField(models.SmallIntegerField(), default=list, db_default=[])
    hour_device_energy_j = ArrayField(models.FloatField(), default=list, db_default=[])
    hour_occupied_s = ArrayField(models.FloatField(), default=list, db_default=[])

    class Meta:
        ordering = ["gpu_id", "day"]
        # (its index: a page of the GPU list sums each GPU's days of the period)
        constraints = [models.UniqueConstraint(fields=["gpu", "day"], name="gpuday_unique")]
        indexes = [
            # The fleet page's heatmap: every GPU's days of a period, ranked by their mean power.
            models.Index(fields=["day"], include=["gpu", "hours", "device_energy_j"], name="gpuday_day"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_id} {self.day}"
