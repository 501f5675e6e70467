"""Per GPU-hour device energy, and the ingest's bookkeeping per cluster."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models

from apps.fleet.models import Cluster, Gpu

from .shards import RESERVED as RESERVED_SHARDS
from .shards import node_pattern_problem


class GpuHour(models.Model):
    """One GPU's closed hour: energy from the agent and from DCGM, idle energy, the residuals."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField(help_text="Start of the hour, UTC.")
    source = models.CharField(max_length=10, help_text="agent, or dcgm where no agent reports this GPU")
    device_energy_j = models.FloatField(help_text="Energy the GPU used: the agent's, else DCGM's.")
    agent_energy_j = models.FloatField(null=True, blank=True)
    dcgm_energy_j = models.FloatField(null=True, blank=True)
    jobs_energy_j = models.FloatField(default=0.0)
    idle_energy_j = models.FloatField(default=0.0)
    unattributed_j = models.FloatField(
        default=0.0, help_text="device - jobs - idle - unobserved: zero when the split adds up."
    )
    unobserved_j = models.FloatField(
        default=0.0,
        db_default=0.0,
        help_text="Energy of time no observer of jobs saw (agent down, dcgm-exporter without job labels): DCGM's "
        "meter less the agent's.",
    )
    unobserved_s = models.FloatField(default=0.0, db_default=0.0, help_text="Seconds of the hour nobody saw jobs.")
    estimated_j = models.FloatField(
        default=0.0, db_default=0.0, help_text="Part of unobserved_j charged to jobs the scheduler says held the GPU."
    )
    estimated_s = models.FloatField(
        default=0.0, db_default=0.0, help_text="GPU-seconds of unobserved time charged to those jobs."
    )
    residual_j = models.FloatField(null=True, blank=True, help_text="agent - DCGM energy.")
    residual_ratio = models.FloatField(null=True, blank=True, help_text="residual / DCGM energy.")
    sampled_s = models.FloatField(default=0.0, help_text="Seconds of the hour the agent sampled.")
    occupied_s = models.FloatField(default=0.0, help_text="GPU-seconds charged to jobs.")
    counter_resets = models.PositiveIntegerField(default=0)
    agent_version = models.CharField(max_length=50, blank=True, help_text="fleetwatt_agent_info's version.")
    contract_gaps = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Extension series (docs/metrics.md) the agent did not export: estimated from the core ones.",
    )
    # The GPU's settings in the hour (apps.telemetry.gpu_settings): the agent's, else dcgm-exporter's; empty where
    # neither exported them (an older agent, an exporter without the fields): unknown, never 0.
    power_limit_w = models.FloatField(null=True, blank=True, help_text="Enforced power limit, mean of the hour (W).")
    power_limit_min_w = models.FloatField(null=True, blank=True, help_text="Least power limit in the hour (W).")
    power_limit_max_w = models.FloatField(null=True, blank=True, help_text="Most power limit in the hour (W).")
    sm_clock_mhz = models.FloatField(null=True, blank=True, help_text="SM clock, mean of the hour's samples (MHz).")
    # The cluster's idle line for this GPU-hour: energy outside jobs, and the hour's unoccupied share.
    idle_facility_kwh = models.FloatField(default=0.0)
    idle_operational_kg = models.FloatField(null=True, blank=True)
    idle_embodied_kg = models.FloatField(default=0.0)
    idle_cost = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    # The part of that idle line nobody saw (docs/arithmetic.md, "The idle line"): unobserved energy and time
    # no estimate charged to a job, within the idle_* figures above (idle seen = idle - unseen).
    unseen_j = models.FloatField(
        default=0.0, db_default=0.0, help_text="unobserved - estimated energy, at most the idle line's."
    )
    unseen_s = models.FloatField(
        default=0.0, db_default=0.0, help_text="unobserved - estimated seconds, at most the idle line's."
    )
    unseen_facility_kwh = models.FloatField(default=0.0, db_default=0.0)
    unseen_operational_kg = models.FloatField(null=True, blank=True)
    unseen_embodied_kg = models.FloatField(default=0.0, db_default=0.0)
    unseen_cost = models.DecimalField(max_digits=16, decimal_places=6, default=0, db_default=0)

    class Meta:
        ordering = ["hour", "gpu_id"]
        constraints = [models.UniqueConstraint(fields=["gpu", "hour"], name="gpuhour_unique")]
        indexes = [models.Index(fields=["hour"], name="gpuhour_hour")]  # fleet totals over a period

    def __str__(self) -> str:
        return f"{self.gpu_id} at {self.hour:%Y-%m-%d %H}:00"


class IngestedHour(models.Model):
    """A cluster-hour that was ingested, with what it cost."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="ingested_hours")
    hour = models.DateTimeField()
    ingested_at = models.DateTimeField(auto_now=True)
    query_count = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(default=0.0)
    prometheus_s = models.FloatField(default=0.0, help_text="Time spent waiting on Prometheus.")
    stats = models.JSONField(default=dict)
    # Written by a fanned-out ingest and not yet derived: the jobs whose rows it changed wait here for the
    # batch's one derivation, and the watermark stays before it until then.
    derived = models.BooleanField(default=True, db_default=True)
    pending_job_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)

    class Meta:
        ordering = ["cluster__name", "hour"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hour"], name="ingestedhour_unique")]

    def __str__(self) -> str:
        return f"{self.cluster} {self.hour:%Y-%m-%d %H}:00"


class IngestWatermark(models.Model):
    """Every hour of the cluster before `ingested_through` has been ingested."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="watermark")
    ingested_through = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name"]

    def __str__(self) -> str:
        return f"{self.cluster} through {self.ingested_through:%Y-%m-%d %H}:00"


class ClusterShard(models.Model):
    """A node group of a big cluster, ingested on its own so that no query loads the whole cluster: its nodes
    are those whose name matches `node_pattern` (a fully anchored RE2 regex, as PromQL's `=~`). The nodes no
    pattern matches form one more group, so the groups always cover the cluster; patterns must not overlap
    (an ingest that finds a GPU in two groups refuses the hour)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="shards")
    name = models.SlugField(max_length=50)
    node_pattern = models.CharField(max_length=500, help_text='e.g. "gpu-a[0-9]+" (nodes gpu-a1, gpu-a2, ...)')

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="clustershard_unique_name"),
            models.CheckConstraint(condition=~models.Q(name="rest"), name="clustershard_rest_is_implicit"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"

    def clean(self) -> None:
        """A pattern Prometheus can run (RE2: no look-around, no back-references), under a name of its own."""
        problems = {}
        if self.name in RESERVED_SHARDS:
            problems["name"] = f"{self.name!r} is reserved (the nodes no shard names are 'rest')."
        problem = node_pattern_problem(self.node_pattern)
        if problem is not None:
            problems["node_pattern"] = problem[0].upper() + problem[1:] + "."
        if problems:
            raise ValidationError(problems)


class IngestBatch(models.Model):
    """The hours of one cluster that beat fanned out as tasks, one per hour and shard. Each part says when it
    is written; the last one queues the batch's one derivation (a latch in Postgres: it survives a killed
    worker and a flushed broker, and beat queues the missing parts of a batch that stalled)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="ingest_batches")
    start = models.DateTimeField()
    end = models.DateTimeField()
    # Where beat meant to get to (the end of the last closed hour): past `end` when the batch was capped.
    aimed_through = models.DateTimeField(null=True, blank=True)
    shards = models.JSONField(
        default=list, help_text='The shards each hour is fetched in, as queued: [{"name", "node_match"}].'
    )
    queued_at = models.DateTimeField(auto_now_add=True)
    requeued_at = models.DateTimeField(null=True, blank=True)
    derive_queued_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-queued_at"]
        constraints = [
            # One open batch per cluster: beat running twice queues nothing twice.
            models.UniqueConstraint(
                fields=["cluster"], condition=models.Q(done_at__isnull=True), name="ingestbatch_one_open"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.start:%Y-%m-%d %H}:00..{self.end:%H}:00"


class IngestPart(models.Model):
    """One shard of one hour of a batch: fetched (its answer staged until the hour's shards are all in), then
    written. A sharded hour is written once all of its shards are staged, from their merged answers."""

    batch = models.ForeignKey(IngestBatch, on_delete=models.CASCADE, related_name="parts")
    hour = models.DateTimeField()
    shard = models.CharField(max_length=50)
    # The shard's parsed answers (sharded hours only), as zlib-compressed JSON (apps.telemetry.shards): opaque
    # bytes, so that Postgres stores them without parsing a jsonb document of thousands of series.
    staged = models.BinaryField(null=True, blank=True)
    fetched_at = models.DateTimeField(auto_now=True)
    written_at = models.DateTimeField(null=True, blank=True, help_text="When its hour's rows were written.")

    class Meta:
        ordering = ["hour", "shard"]
        constraints = [models.UniqueConstraint(fields=["batch", "hour", "shard"], name="ingestpart_unique")]

    def __str__(self) -> str:
        return f"batch {self.batch_id} {self.hour:%Y-%m-%d %H}:00 {self.shard}"
