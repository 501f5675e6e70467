"""What turns GPU energy into facility energy, carbon and money: sites, server types, GPU models,
hourly grid intensity, and job groups."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models


class Basis(models.TextChoices):
    """How an intensity figure was derived; a report never mixes them."""

    LOCATION = "location", "Location-based"
    MARKET = "market", "Market-based"
    MARGINAL = "marginal", "Marginal"


class Site(models.Model):
    """A data centre: its grid zone, PUE, electricity price, and whether the provider's figures already
    include facility overhead (then PUE is 1.0, so it is never applied twice)."""

    name = models.SlugField(max_length=100, unique=True)
    grid_zone = models.CharField(max_length=50, help_text="Electricity Maps zone id, e.g. DE, US-CAL-CISO.")
    intensity_basis = models.CharField(max_length=10, choices=Basis.choices, default=Basis.LOCATION)
    pue = models.FloatField(default=1.0, validators=[MinValueValidator(1.0)], help_text="Used for months not listed.")
    pue_by_month = models.JSONField(default=dict, blank=True, help_text='{"1": 1.25, ..., "12": 1.2}')
    provider_includes_overhead = models.BooleanField(
        default=False, help_text="The provider's energy figures already include facility overhead: PUE 1.0."
    )
    electricity_price_per_kwh = models.DecimalField(max_digits=10, decimal_places=5, default=Decimal("0"))
    currency = models.CharField(max_length=3, default="EUR")
    timezone = models.CharField(max_length=64, default="UTC", help_text="For weekly reports (IANA name).")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def pue_for_month(self, month: int) -> float:
        if self.provider_includes_overhead:
            return 1.0
        return float(self.pue_by_month.get(str(month), self.pue))


class ServerType(models.Model):
    """A server model: node overhead (measured server power / summed GPU power) and embodied carbon."""

    name = models.SlugField(max_length=100, unique=True)
    node_overhead_factor = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(1.0)], help_text="Empty until measured (1.0 is used)."
    )
    embodied_kg_per_server = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    service_life_h = models.FloatField(default=5 * 8760, validators=[MinValueValidator(1.0)])
    gpus_per_server = models.PositiveSmallIntegerField(default=8, validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def overhead(self) -> float:
        return self.node_overhead_factor or 1.0

    @property
    def embodied_kg_per_gpu_hour(self) -> float:
        return self.embodied_kg_per_server / self.service_life_h / self.gpus_per_server


class GpuModel(models.Model):
    """A GPU model by the name the driver reports (dcgm-exporter's modelName): its hourly rate and TDP."""

    name = models.CharField(max_length=100, unique=True, help_text='As reported, e.g. "NVIDIA H200".')
    hourly_rate = models.DecimalField(max_digits=10, decimal_places=4, default=Decimal("0"))
    currency = models.CharField(max_length=3, default="EUR")
    tdp_w = models.FloatField(default=700.0, validators=[MinValueValidator(1.0)])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class IntensityHour(models.Model):
    """Grid carbon intensity of one zone for one UTC hour, on one basis, from one source."""

    zone = models.CharField(max_length=50)
    basis = models.CharField(max_length=10, choices=Basis.choices)
    hour = models.DateTimeField()
    kg_per_kwh = models.FloatField()
    source = models.CharField(max_length=200)
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["zone", "basis", "hour"]
        constraints = [models.UniqueConstraint(fields=["zone", "basis", "hour"], name="intensity_unique_hour")]

    def __str__(self) -> str:
        return f"{self.zone} {self.basis} {self.hour:%Y-%m-%d %H}:00 {self.kg_per_kwh}"


class ForecastHour(models.Model):
    """A forecast of a zone's grid intensity for one UTC hour, on one basis, from one source: kept apart from the
    measured IntensityHour, so that a forecast never stands in for a measurement (footprints read IntensityHour
    only). A later import of an hour replaces the earlier forecast of it."""

    zone = models.CharField(max_length=50)
    basis = models.CharField(max_length=10, choices=Basis.choices)
    hour = models.DateTimeField()
    kg_per_kwh = models.FloatField()
    source = models.CharField(max_length=200)
    issued_at = models.DateTimeField(null=True, blank=True, help_text="When the forecast was made, where known.")
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["zone", "basis", "hour"]
        # Also the index of the hints' query: a zone's forecast for the hours from now to the deadline.
        constraints = [models.UniqueConstraint(fields=["zone", "basis", "hour"], name="forecast_unique_hour")]

    def __str__(self) -> str:
        return f"{self.zone} {self.basis} {self.hour:%Y-%m-%d %H}:00 forecast {self.kg_per_kwh}"


class JobGroup(models.Model):
    """A campaign or model that several runs belong to: its footprint includes failed runs and sweeps."""

    class MatchKind(models.TextChoices):
        ACCOUNT = "account", "Slurm account"
        NAME_PREFIX = "name_prefix", "Job name starts with"
        NAMESPACE = "namespace", "Kubernetes namespace"
        USER = "user", "User"
        # Exactly the group the scheduler puts a job in (Job.group_key): slurm-array/6, k8s/search/Job/train-1.
        GROUP_KEY = "group_key", "Scheduler group (Slurm array, Kubernetes owner)"

    name = models.SlugField(max_length=100, unique=True)
    match_kind = models.CharField(max_length=20, choices=MatchKind.choices)
    match_value = models.CharField(max_length=255)
    flexible = models.BooleanField(default=False, help_text="Its runs could move in time: show the carbon hint.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ServerTypeRule(models.Model):
    """Which server type a cluster's nodes are, by hostname pattern (glob), so nodes that appear at a
    later ingest get theirs too. Lower priority numbers are tried first."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="server_type_rules")
    hostname_glob = models.CharField(max_length=255, help_text="e.g. gpu-a*")
    server_type = models.ForeignKey(ServerType, on_delete=models.CASCADE, related_name="rules")
    priority = models.PositiveIntegerField(default=100)

    class Meta:
        ordering = ["cluster_id", "priority", "id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hostname_glob"], name="servertyperule_unique_glob")]

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.hostname_glob} -> {self.server_type}"


class WhenToRunHint(models.Model):
    """A hint of record (apps.carbon.when_services.hints_record, hourly): for a team's flexible job group, the
    cleanest start within the deadline by the forecast of the hour it was made, with the typical run and the
    forecast it was computed from, so that it can be checked against the intensity that came."""

    class ForecastKind(models.TextChoices):
        IMPORTED = "imported", "Imported forecast"
        PROFILE = "profile", "Profile of recent weeks"

    team = models.ForeignKey("fleet.Team", on_delete=models.CASCADE, related_name="when_to_run_hints")
    job_group = models.ForeignKey(JobGroup, on_delete=models.CASCADE, related_name="when_to_run_hints")
    zone = models.CharField(max_length=50)
    basis = models.CharField(max_length=10, choices=Basis.choices)
    made_at = models.DateTimeField(help_text="The UTC hour the hint looks forward from (its now).")
    deadline_h = models.PositiveIntegerField(help_text="FLEETWATT_SHIFT_DEADLINE_H when it was made.")
    runs = models.PositiveIntegerField(help_text="How many recent runs its typical run is from.")
    run_kwh = models.JSONField(help_text="The typical run's facility kWh in each hour from its start.")
    forecast_kind = models.CharField(max_length=10, choices=ForecastKind.choices)
    forecast_source = models.CharField(max_length=300)
    forecast = models.JSONField(
        help_text="kg/kWh of each hour from made_at to the deadline, as forecast (null: unknown)."
    )
    best_start = models.DateTimeField()
    now_kg = models.FloatField(help_text="kg CO2e of the typical run started at made_at, by the forecast.")
    best_kg = models.FloatField(help_text="kg CO2e of the typical run started at best_start, by the forecast.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-made_at", "team_id", "job_group_id", "zone"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "job_group", "zone", "basis", "made_at"], name="when_hint_unique_hour"
            )
        ]
        # A team's hints made in a period (the team page, the weekly report, /api/when-to-run/).
        indexes = [models.Index(fields=["team", "made_at"], name="when_hint_team_made")]

    def __str__(self) -> str:
        return (
            f"{self.team_id}/{self.job_group_id} {self.zone} {self.made_at:%Y-%m-%d %H}:00 -> {self.best_start:%H}:00"
        )
