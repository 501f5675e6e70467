"""Jobs and their measured energy per GPU, hour and split method."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.contrib.postgres.fields import ArrayField
from django.db import models

from apps.fleet.models import Cluster, Gpu, Team, team_scoped

from .methods import METHOD_CHOICES
from .states import STATE_CHOICES, JobState

if TYPE_CHECKING:
    from datetime import date, datetime

    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class Source(models.TextChoices):
    AGENT = "agent", "fleetwatt-agent"
    DCGM = "dcgm", "dcgm-exporter only"
    SCHEDULER = "scheduler", "scheduler accounting only"
    # Derived, not measured: occupancy and energy of time the scheduler says a job held a GPU that no
    # observer of jobs saw (apps.jobs.unobserved; DESIGN section 8).
    ESTIMATED = "estimated", "estimated for time nobody saw"


def days_reach(*, start: datetime, end: datetime, path: str = "") -> models.Q:
    """The jobs (at `path`, e.g. "job__" from their rows) whose hour rows may lie in [start, end): their days (those
    of their first and last hour rows, Job.first_day and last_day) reach into it, or are not recorded. A read of a
    period's rows of some jobs can then find those jobs by an index on their days, not read every one of them."""
    first = start.astimezone(UTC).date()
    last = (end - timedelta(microseconds=1)).astimezone(UTC).date()
    return models.Q(**{f"{path}last_day__isnull": True}) | models.Q(
        **{f"{path}last_day__gte": first, f"{path}first_day__lte": last}
    )


class JobQuerySet(models.QuerySet["Job"]):
    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> JobQuerySet:
        """Jobs of the teams the user may see."""
        return team_scoped(self, user, team_path="team")

    def seen_since(self, when: datetime) -> JobQuerySet:
        """Jobs still running at or after `when`: last seen then or later (index job_team_last_seen), or
        with no last-seen time known (an agent that does not export it), which counts as still seen."""
        return self.filter(models.Q(last_seen__gte=when) | models.Q(last_seen__isnull=True))

    def across_days(self, first: date, after: date) -> JobQuerySet:
        """Jobs whose hour rows are on more than one UTC day, some of them in [first, after) (partial indexes
        job_billed_team_across_days, job_cluster_across_days and job_group_across_days)."""
        return self.filter(across_days=True, last_day__gte=first, first_day__lt=after)


class Job(models.Model):
    """A job on a cluster (unique by job_key), with its summary derived from its hour rows."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="jobs")
    job_key = models.CharField(max_length=255, help_text="slurm/<id>, k8s/<ns>/<pod>, container/<id>, proc/<pid>-<t>")
    scheduler = models.CharField(max_length=20, blank=True)
    job_id = models.CharField(max_length=255, blank=True)
    user = models.CharField(max_length=255, blank=True)
    account = models.CharField(max_length=255, blank=True)
    namespace = models.CharField(max_length=255, blank=True)
    pod = models.CharField(max_length=255, blank=True)
    name = models.CharField(max_length=255, blank=True)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="jobs")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.AGENT)

    start = models.DateTimeField(null=True, blank=True)
    end = models.DateTimeField(null=True, blank=True, help_text="Empty while the job may still run.")
    last_seen = models.DateTimeField(null=True, blank=True)

    # The scheduler's record (apps.schedulers.services.scheduler_records_write; DESIGN section 8). Empty or
    # null where no record describes the job; `state` is then "unknown". The columns have database defaults
    # too, so that the previous release's code can still insert jobs while they are added.
    state = models.CharField(
        max_length=20, choices=STATE_CHOICES, default=JobState.UNKNOWN, db_default=JobState.UNKNOWN.value
    )
    exit_code = models.IntegerField(null=True, blank=True, help_text="Exit status; null: killed by a signal, unknown.")
    signal = models.IntegerField(null=True, blank=True, help_text="Signal that killed it; 0: none; null: unknown.")
    partition = models.CharField(max_length=255, blank=True, db_default="")
    qos = models.CharField(max_length=255, blank=True, db_default="")
    display_id = models.CharField(
        max_length=255, blank=True, db_default="", help_text="The scheduler's name: 6_2 for an array task."
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    scheduler_start = models.DateTimeField(null=True, blank=True, help_text="When its allocation began.")
    scheduler_end = models.DateTimeField(null=True, blank=True, help_text="When its allocation ended.")
    gpus_requested = models.PositiveIntegerField(null=True, blank=True)
    gpus_allocated = models.PositiveIntegerField(null=True, blank=True)
    node_list = models.TextField(blank=True, db_default="", help_text="Nodes of its allocation, comma-separated.")
    gpu_indices = models.JSONField(
        default=dict, blank=True, db_default={}, help_text="GPU indices per node of its allocation, where known."
    )
    group_key = models.CharField(
        max_length=255,
        blank=True,
        db_default="",
        help_text="What the scheduler groups it under: a Slurm array (slurm-array/<id>), a Kubernetes owner "
        "(k8s/<namespace>/<Kind>/<name>).",
    )
    labels = models.JSONField(
        default=dict,
        blank=True,
        db_default={},
        help_text="The scheduler's allow-listed labels (Kubernetes pod labels).",
    )
    scheduler_seen_at = models.DateTimeField(null=True, blank=True, help_text="When a record last described it.")
    scheduler_missing = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Seen by the agent, but absent from a whole window of its scheduler's accounting.",
    )

    # Summary over all ingested hours; recomputed from the hour rows after every ingest.
    energy_j = models.FloatField(default=0.0)
    attribution = models.CharField(max_length=20, choices=METHOD_CHOICES, blank=True)
    attribution_j = models.JSONField(default=dict)
    sampled_s = models.FloatField(default=0.0)
    expected_s = models.FloatField(default=0.0)
    coverage = models.FloatField(default=0.0)
    gpu_hours = models.FloatField(default=0.0)
    # The interval of energy_j where part of it was split on a shared GPU (apps.jobs.uncertainty); empty where all
    # of it is exact (one job on its GPUs) or estimated.
    energy_low_j = models.FloatField(null=True, blank=True)
    energy_high_j = models.FloatField(null=True, blank=True)
    sm_s = models.FloatField(default=0.0)
    peak_memory_bytes = models.BigIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    # The UTC days of its first and last hour rows (empty without any): a job within one day is counted in its
    # team's daily sums of rounded costs (TeamDay.cost_units); one across days is read from its rows.
    first_day = models.DateField(null=True, blank=True)
    last_day = models.DateField(null=True, blank=True)
    # Stored, not compared in a query: the planner knows how many jobs are across days from this column's
    # statistics, where it takes a third of them for a comparison of two columns (and then reads them all).
    across_days = models.GeneratedField(
        expression=models.ExpressionWrapper(models.Q(first_day__lt=models.F("last_day")), models.BooleanField()),
        output_field=models.BooleanField(), db_persist=True,
    )  # fmt: skip
    flags = ArrayField(models.CharField(max_length=30), default=list, blank=True)
    job_group = models.ForeignKey(
        "carbon.JobGroup", on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs"
    )
    # Admin decisions (apps.waste.audit): kept by later ingests, recorded in the audit log.
    team_locked = models.BooleanField(default=False, help_text="Team set by an admin, not by the rules.")
    group_locked = models.BooleanField(default=False, help_text="Job group set by an admin.")
    excluded_from_bill = models.BooleanField(
        default=False, help_text="Left out of its team's bill; still in the fleet's totals."
    )
    rows_expired = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Some of its hour rows were dropped (FLEETWATT_HOUR_ROWS_KEEP_MONTHS): its totals, footprint and "
        "findings are kept as they were and no longer derived.",
    )

    # Footprint: the sums of its hour rows (apps.carbon.services.footprints_refresh).
    server_kwh = models.FloatField(default=0.0)
    facility_kwh = models.FloatField(default=0.0)
    operational_kg = models.FloatField(null=True, blank=True, help_text="Empty where the site has no zone.")
    embodied_kg = models.FloatField(default=0.0)
    cost = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    currency = models.CharField(max_length=3, blank=True)
    intensity_source = models.CharField(max_length=200, blank=True)
    intensity_basis = models.CharField(max_length=10, blank=True)
    intensity_estimated = models.BooleanField(default=False, help_text="Some hours' intensity was filled in.")
    work_units = models.FloatField(null=True, blank=True, help_text="Work the job reports, for SCI.")
    work_unit = models.CharField(max_length=30, blank=True, help_text='e.g. "1k_tokens", "request"; empty: a run.')
    shift_saving_kg = models.FloatField(null=True, blank=True, help_text="Carbon hint: kg a shift could save.")
    tdp_estimate_j = models.FloatField(
        null=True,
        blank=True,
        help_text="What a TDP-based tool would claim: GPU-seconds held x the GPU model's TDP (J). Empty where a GPU's "
        "model has no TDP in the fleet config, or not yet derived.",
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-start", "id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "job_key"], name="job_unique_key")]
        indexes = [
            # /api/jobs/?team=&start=&end= and the team dashboard.
            models.Index(fields=["team", "start"], name="job_team_start"),
            # /api/jobs/?start=&end= across teams (finance, fleet dashboard).
            models.Index(fields=["start"], name="job_start"),
            # The cursor pages of a team's jobs, newest first.
            models.Index(fields=["team", "-start", "-id"], name="job_team_start_desc"),
            # The team dashboard: jobs that ran in a period (last seen after its start, recent ones first), with what
            # its page and job list read of each (apps.rollups.team_parts) read from the index alone: a team's month is
            # thousands of jobs on as many of the table's pages.
            models.Index(
                fields=["team", "last_seen"],
                include=[
                    "id", "start", "user", "job_group", "state", "currency", "excluded_from_bill", "cost",
                    "intensity_source", "first_day", "last_day", "rows_expired",
                ],
                name="job_team_last_seen",
            ),
            # The fleet page: jobs of every team that ran in a period.
            models.Index(fields=["last_seen"], name="job_last_seen"),
            # /api/jobs/?state= (failed runs across the fleet), newest first.
            models.Index(fields=["state", "start"], name="job_state_start"),
            # /api/jobs/?partition=, newest first.
            models.Index(fields=["partition", "start"], name="job_partition_start"),
            # /api/jobs/?account=, newest first.
            models.Index(fields=["account", "start"], name="job_account_start"),
            # A team's billed jobs with their currency, read from the index alone: what the sums of rounded job
            # costs (rollups, teams side by side) join their job-GPU-hours to, instead of reading every job.
            models.Index(
                fields=["team", "id"], include=["currency"], condition=models.Q(excluded_from_bill=False),
                name="job_billed_team",
            ),
            # The fleet's and a team's jobs under the coverage threshold (few, where agents cover the fleet): the
            # pages list them without reading every job of the period (apps.jobs.selectors.low_coverage_jobs).
            models.Index(fields=["coverage"], condition=models.Q(sampled_s__gt=0), name="job_sampled_coverage"),
            # A team's job ids, read from the index alone: its jobs' rows of the hours of a day a period cuts and
            # its jobs' days past retention (apps.rollups.team_parts).
            models.Index(fields=["team", "id"], name="job_team_id"),
            # A finding's job's currency and days, read from the index alone: the audit queue reads them for every
            # open finding (10,000 jobs on as many of the table's pages), apps.waste.selectors.queue_triage.
            models.Index(fields=["id"], include=["currency", "first_day", "last_day"], name="job_id_days_currency"),
            # A team's jobs an admin excluded from its bill (few): their part of the team's GPU-hours on a cluster
            # (its share of the idle line, apps.rollups.selectors.team_idle).
            models.Index(fields=["team"], condition=models.Q(excluded_from_bill=True), name="job_excluded_team"),
            # A team's billed jobs across UTC days, by their last: the jobs whose rounded costs the sums of rounded
            # job costs read from their rows (those within one day are in their team's daily sums).
            models.Index(
                fields=["team", "last_day"], include=["first_day"],
                condition=models.Q(excluded_from_bill=False, across_days=True),
                name="job_billed_team_across_days",
            ),
            # A cluster's and a job group's jobs across UTC days, likewise (their rollups bill nobody: all jobs).
            models.Index(
                fields=["cluster", "last_day"], include=["first_day"], condition=models.Q(across_days=True),
                name="job_cluster_across_days",
            ),
            models.Index(
                fields=["job_group", "last_day"], include=["first_day"], condition=models.Q(across_days=True),
                name="job_group_across_days",
            ),
            # A job group's jobs whose days reach into a period (days_reach), of a member's teams or of all: its runs
            # by outcome read only those jobs' rows (apps.rollups.outcome_selectors.job_groups_outcome_sums), not
            # every run of the group's year (nor, for a member, every job of their teams).
            models.Index(
                fields=["job_group", "team", "last_day"], include=["first_day"], name="job_group_team_last_day"
            ),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.cluster}:{self.job_key}"


class JobGpuHour(models.Model):
    """What one job did on one GPU in one closed hour (UTC): sampling, SM time, memory, occupancy."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="gpu_hours_rows")
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="job_hours")
    hour = models.DateTimeField(help_text="Start of the hour, UTC.")
    source = models.CharField(max_length=10, choices=Source.choices)
    energy_j = models.FloatField(default=0.0)
    sampled_s = models.FloatField(default=0.0)
    sm_s = models.FloatField(default=0.0)
    occupancy_s = models.FloatField(default=0.0, help_text="GPU-seconds charged to the job (shared by time present).")
    peak_memory_bytes = models.BigIntegerField(default=0)
    job_start = models.DateTimeField(null=True, blank=True, help_text="Job start as reported in this hour.")
    first_seen = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    # Footprint of this GPU-hour's share (apps.carbon.services.footprints_refresh).
    server_kwh = models.FloatField(default=0.0)
    facility_kwh = models.FloatField(default=0.0)
    intensity_kg_per_kwh = models.FloatField(null=True, blank=True)
    intensity_estimated = models.BooleanField(default=False)
    operational_kg = models.FloatField(null=True, blank=True)
    embodied_kg = models.FloatField(default=0.0)
    cost = models.DecimalField(max_digits=16, decimal_places=6, default=0)

    class Meta:
        ordering = ["hour", "gpu_id"]
        # A job can have a measured row and an estimated one (time nobody saw) in one GPU-hour.
        constraints = [models.UniqueConstraint(fields=["job", "gpu", "hour", "source"], name="jobgpuhour_unique")]
        indexes = [
            # Replacing one cluster-hour on re-ingest, and the GPU page's hours.
            models.Index(fields=["gpu", "hour"], name="jobgpuhour_gpu_hour"),
            # Rollups over a period.
            models.Index(fields=["hour"], name="jobgpuhour_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} on {self.gpu_id} at {self.hour:%Y-%m-%d %H}:00"


class JobGpuHourEnergy(models.Model):
    """Joules given to one job on one GPU in one hour by one split method."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="energy_rows")
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="job_energy_rows")
    hour = models.DateTimeField()
    method = models.CharField(max_length=20, choices=METHOD_CHOICES)
    energy_j = models.FloatField()

    class Meta:
        ordering = ["hour", "gpu_id", "method"]
        constraints = [models.UniqueConstraint(fields=["job", "gpu", "hour", "method"], name="jobgpuhourenergy_unique")]
        indexes = [
            # Re-ingest of one cluster-hour; daily energy per team by method on the dashboard.
            models.Index(fields=["hour", "gpu"], name="jobenergy_hour_gpu"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} {self.method} {self.energy_j:.0f} J"


class ExpiredJobDay(models.Model):
    """A job's cost on one cluster and one UTC day whose hour rows were dropped past retention
    (`apps.telemetry.partitions.hour_rows_expire` writes them just before): the rollups' costs in minor units (each
    job rounded on its own) read these days here, and the other days from the job-GPU-hours."""

    # The job's own index would repeat the unique key's first column.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="expired_days", db_index=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="expired_job_days")
    day = models.DateField()
    cost = models.DecimalField(max_digits=18, decimal_places=6)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "cluster", "day"], name="expiredjobday_unique")]
        # The rollups ask whether a range has any (every ask) before they read them.
        indexes = [models.Index(fields=["day"], name="expiredjobday_day")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.cluster_id} {self.day}"


class JobWorkHour(models.Model):
    """The work one job counted in one closed hour (UTC), read from Prometheus (apps.telemetry.work): the tokens and
    requests a serving engine counted for one model, or the units of the job's own work counter."""

    # The unique key's first column serves the job's own reads.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="work_hours", db_index=False)
    hour = models.DateTimeField(help_text="Start of the hour, UTC.")
    engine = models.CharField(max_length=30, help_text="vllm, tgi, sglang, triton, fleetwatt (the job's own counter)")
    model = models.CharField(max_length=255, blank=True, help_text="The model served; empty: the engine names none.")
    unit = models.CharField(max_length=30, blank=True, help_text="The job's own counter's unit; empty for an engine.")
    output_tokens = models.FloatField(default=0.0, help_text="Tokens generated.")
    prompt_tokens = models.FloatField(default=0.0, help_text="Prompt (prefill) tokens processed.")
    requests = models.FloatField(default=0.0, help_text="Requests served.")
    units = models.FloatField(default=0.0, help_text="Units of the job's own work counter.")

    class Meta:
        ordering = ["hour", "job_id", "engine", "model", "unit"]
        constraints = [
            models.UniqueConstraint(fields=["job", "hour", "engine", "model", "unit"], name="jobworkhour_unique")
        ]
        # The work of a period (the per-token figures), and replacing one cluster-hour on re-ingest.
        indexes = [models.Index(fields=["hour"], name="jobworkhour_hour")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.engine} {self.model or '-'} at {self.hour:%Y-%m-%d %H}:00"
