"""Job serializers: every quantity carries its unit in its name (DESIGN section 5)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy

J_PER_KWH = 3.6e6


class JobSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True, help_text="Cluster name.")
    team = serializers.SlugRelatedField(slug_field="name", read_only=True, help_text="Team the job is charged to.")
    gpu_hours = serializers.FloatField(help_text="GPU-hours occupied, shared with jobs present at the same time (h).")
    energy_j = serializers.FloatField(help_text="GPU energy measured for the job (J).")
    facility_kwh = serializers.SerializerMethodField(
        help_text="Facility energy (kWh): GPU energy x node overhead x PUE; both 1.0 until configured."
    )
    attribution = serializers.CharField(
        help_text="Dominant split method: whole_gpu, sm_time, busy_time, memory, equal."
    )
    attribution_j = serializers.DictField(child=serializers.FloatField(), help_text="Joules per split method (J).")
    coverage = serializers.FloatField(help_text="Sampled GPU-seconds / expected GPU-seconds (0..1).")
    operational_kg = serializers.SerializerMethodField(help_text="Operational CO2e (kg); null until intensity is set.")
    embodied_kg = serializers.SerializerMethodField(help_text="Embodied CO2e (kg); null until server types are set.")
    cost = serializers.SerializerMethodField(help_text="Cost in `currency`; null until prices are set.")
    currency = serializers.SerializerMethodField(help_text="ISO 4217 currency of `cost`.")
    flags = serializers.ListField(child=serializers.CharField(), help_text="Kinds of open flags on the job.")

    class Meta:
        model = Job
        fields = [
            "id",
            "cluster",
            "job_key",
            "scheduler",
            "job_id",
            "user",
            "account",
            "namespace",
            "pod",
            "name",
            "team",
            "source",
            "start",
            "end",
            "last_seen",
            "gpu_count",
            "gpu_hours",
            "energy_j",
            "facility_kwh",
            "attribution",
            "attribution_j",
            "coverage",
            "sampled_s",
            "expected_s",
            "sm_s",
            "peak_memory_bytes",
            "operational_kg",
            "embodied_kg",
            "cost",
            "currency",
            "flags",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField())
    def get_facility_kwh(self, job: Job) -> float:
        return job.energy_j / J_PER_KWH

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_operational_kg(self, job: Job) -> float | None:
        return None

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_embodied_kg(self, job: Job) -> float | None:
        return None

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True))
    def get_cost(self, job: Job) -> None:
        return None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_currency(self, job: Job) -> None:
        return None


class JobGpuHourSerializer(serializers.ModelSerializer):
    gpu_uuid = serializers.CharField(source="gpu.uuid", help_text="GPU UUID.")
    hostname = serializers.CharField(source="gpu.node.hostname")
    gpu_index = serializers.IntegerField(source="gpu.index")
    attribution_j = serializers.SerializerMethodField(help_text="Joules per split method in this GPU-hour (J).")

    class Meta:
        model = JobGpuHour
        fields = [
            "hour",
            "gpu_uuid",
            "hostname",
            "gpu_index",
            "source",
            "energy_j",
            "attribution_j",
            "sampled_s",
            "sm_s",
            "occupancy_s",
            "peak_memory_bytes",
            "first_seen",
            "last_seen",
        ]

    @extend_schema_field(serializers.DictField(child=serializers.FloatField()))
    def get_attribution_j(self, row: JobGpuHour) -> dict[str, float]:
        energy: dict[tuple[int, Any], dict[str, float]] = self.context.get("energy", {})
        return energy.get((row.gpu_id, row.hour), {})


class JobDetailSerializer(JobSerializer):
    hours = serializers.SerializerMethodField(help_text="Per GPU and hour: energy by method, sampling, memory.")
    gpus = serializers.SerializerMethodField(help_text="Per GPU: energy, sampled seconds and coverage.")

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "gpus", "hours"]
        read_only_fields = fields

    def _energy(self, job: Job) -> dict[tuple[int, Any], dict[str, float]]:
        energy: dict[tuple[int, Any], dict[str, float]] = {}
        for row in JobGpuHourEnergy.objects.filter(job=job).order_by("hour", "gpu_id", "method"):
            energy.setdefault((row.gpu_id, row.hour), {})[row.method] = row.energy_j
        return energy

    @extend_schema_field(JobGpuHourSerializer(many=True))
    def get_hours(self, job: Job) -> list[dict[str, Any]]:
        rows = JobGpuHour.objects.filter(job=job).select_related("gpu__node").order_by("hour", "gpu__index")
        return JobGpuHourSerializer(rows, many=True, context={"energy": self._energy(job)}).data  # type: ignore[return-value]

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_gpus(self, job: Job) -> list[dict[str, Any]]:
        per_gpu: dict[str, dict[str, Any]] = {}
        for row in JobGpuHour.objects.filter(job=job).select_related("gpu__node"):
            g = per_gpu.setdefault(
                row.gpu.uuid,
                {
                    "gpu_uuid": row.gpu.uuid,
                    "hostname": row.gpu.node.hostname,
                    "gpu_index": row.gpu.index,
                    "energy_j": 0.0,
                    "sampled_s": 0.0,
                    "occupancy_s": 0.0,
                    "peak_memory_bytes": 0,
                },
            )
            g["energy_j"] += row.energy_j
            g["sampled_s"] += row.sampled_s
            g["occupancy_s"] += row.occupancy_s
            g["peak_memory_bytes"] = max(g["peak_memory_bytes"], row.peak_memory_bytes)
        return sorted(per_gpu.values(), key=lambda g: (g["hostname"], g["gpu_index"]))
