from typing import ClassVar

from rest_framework import serializers

from apps.carbon.models import JobGroup, Site
from apps.core.web.serializers import PlannedRepresentationMixin
from apps.fleet.models import Cluster, Gpu, Team
from apps.telemetry.models import GpuHour


class GpuSerializer(PlannedRepresentationMixin, serializers.ModelSerializer):
    cluster = serializers.CharField(source="node.cluster.name", help_text="Cluster name.")
    hostname = serializers.CharField(source="node.hostname", help_text="Node hostname.")
    hours = serializers.IntegerField(source="hours_count", help_text="Ingested hours in the period (h).")
    energy_j = serializers.FloatField(help_text="Device energy in the period (J).")
    jobs_energy_j = serializers.FloatField(help_text="Energy measured and attributed to jobs (J).")
    idle_energy_j = serializers.FloatField(help_text="Energy in samples with no job (J).")
    unobserved_j = serializers.FloatField(
        help_text="Energy of time no observer of jobs saw (agent down; dcgm-exporter without job labels): DCGM's "
        "meter less the agent's (J). energy_j = jobs_energy_j + idle_energy_j + unobserved_j."
    )
    estimated_j = serializers.FloatField(
        help_text="The part of unobserved_j charged to jobs their scheduler says held the GPU (J, method estimated)."
    )
    occupied_s = serializers.FloatField(help_text="GPU-seconds charged to jobs the agent saw (s).")
    estimated_s = serializers.FloatField(
        help_text="GPU-seconds charged to jobs for time they held the GPU but were not seen on it (s)."
    )
    utilisation = serializers.SerializerMethodField(
        help_text="Allocated share of the ingested hours, seen and estimated (0..1)."
    )

    class Meta:
        model = Gpu
        fields = [
            "id",
            "uuid",
            "cluster",
            "hostname",
            "index",
            "model_name",
            "hours",
            "energy_j",
            "jobs_energy_j",
            "idle_energy_j",
            "unobserved_j",
            "estimated_j",
            "occupied_s",
            "estimated_s",
            "utilisation",
        ]

    row_method_columns: ClassVar[dict[str, tuple[str, ...]]] = {
        "utilisation": ("hours_count", "occupied_s", "estimated_s")
    }

    def get_utilisation(self, gpu: Gpu) -> float:
        hours = getattr(gpu, "hours_count", 0) or 0
        allocated_s = (getattr(gpu, "occupied_s", 0.0) or 0.0) + (getattr(gpu, "estimated_s", 0.0) or 0.0)
        return allocated_s / (hours * 3600.0) if hours else 0.0


class GpuDetailSerializer(GpuSerializer):
    """A GPU as in the list, and its power limit and SM clock over the period (apps.telemetry.selectors.
    gpu_settings_over; docs/arithmetic.md, "A GPU's settings over a period"): null where no GPU-hour knew them."""

    power_limit_w = serializers.FloatField(
        source="period_settings.power_limit_w",
        allow_null=True,
        help_text="Enforced power limit: the mean of its GPU-hours' means where known, each GPU-hour alike (W).",
    )
    power_limit_min_w = serializers.FloatField(
        source="period_settings.power_limit_min_w", allow_null=True, help_text="Least power limit seen (W)."
    )
    power_limit_max_w = serializers.FloatField(
        source="period_settings.power_limit_max_w", allow_null=True, help_text="Most power limit seen (W)."
    )
    power_limit_hours = serializers.IntegerField(
        source="period_settings.power_limit_hours", help_text="GPU-hours of the period whose power limit is known."
    )
    sm_clock_mhz = serializers.FloatField(
        source="period_settings.sm_clock_mhz",
        allow_null=True,
        help_text="SM clock: the mean of its GPU-hours' means where known, each GPU-hour alike (MHz).",
    )
    sm_clock_hours = serializers.IntegerField(
        source="period_settings.sm_clock_hours", help_text="GPU-hours of the period whose SM clock is known."
    )

    class Meta(GpuSerializer.Meta):
        fields = [
            *GpuSerializer.Meta.fields,
            "power_limit_w",
            "power_limit_min_w",
            "power_limit_max_w",
            "power_limit_hours",
            "sm_clock_mhz",
            "sm_clock_hours",
        ]


class GpuHourSerializer(serializers.ModelSerializer):
    """One GPU-hour as stored: its energy, occupancy and settings (docs/arithmetic.md, "Power limit and SM clock")."""

    class Meta:
        model = GpuHour
        fields = [
            "hour",
            "source",
            "device_energy_j",
            "jobs_energy_j",
            "idle_energy_j",
            "unobserved_j",
            "estimated_j",
            "residual_ratio",
            "sampled_s",
            "occupied_s",
            "estimated_s",
            "counter_resets",
            "agent_version",
            "power_limit_w",
            "power_limit_min_w",
            "power_limit_max_w",
            "sm_clock_mhz",
        ]
        read_only_fields = fields
        extra_kwargs = {  # the columns the model leaves without a word
            "jobs_energy_j": {"help_text": "Energy measured and attributed to jobs (J)."},
            "idle_energy_j": {"help_text": "Energy in samples with no job (J)."},
            "counter_resets": {"help_text": "Times the driver's energy counter went backwards in the hour."},
        }


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "name", "display_name"]


class ClusterSerializer(serializers.ModelSerializer):
    site: "serializers.SlugRelatedField[Site]" = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Cluster
        fields = ["id", "name", "site", "scrape_interval_s"]


class JobGroupSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobGroup
        fields = ["id", "name", "match_kind", "match_value", "flexible"]
