"""Query parameters and schema of the rollup endpoints."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, timedelta
from typing import Any

from rest_framework import serializers

MAX_ROLLUP_DAYS = 400


class PeriodQuerySerializer(serializers.Serializer):
    start = serializers.DateTimeField(help_text="Period start (ISO 8601 date or time, UTC if no zone).")
    end = serializers.DateTimeField(help_text="Period end, exclusive.")

    def to_internal_value(self, data: Mapping[str, Any]) -> dict:
        values = dict(data.items())  # the request's query parameters, copied to be rewritten
        for key in ("start", "end"):
            value = values.get(key)
            if isinstance(value, str) and len(value) == 10:  # a plain date
                values[key] = f"{value}T00:00:00Z"
        return super().to_internal_value(values)

    def validate(self, attrs: dict) -> dict:
        for key in ("start", "end"):
            if attrs[key].tzinfo is None:
                attrs[key] = attrs[key].replace(tzinfo=UTC)
        if attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError("start must be before end.")
        if attrs["end"] - attrs["start"] > timedelta(days=MAX_ROLLUP_DAYS):
            raise serializers.ValidationError(f"A rollup covers at most {MAX_ROLLUP_DAYS} days.")
        return attrs


class RollupQuerySerializer(PeriodQuerySerializer):
    granularity = serializers.ChoiceField(choices=["day", "week", "month"], default="day")


class IdleLineSerializer(serializers.Serializer):
    energy_j = serializers.FloatField(help_text="GPU energy outside every job (J).")
    gpu_hours = serializers.FloatField(help_text="GPU-hours no job occupied (h).")
    facility_kwh = serializers.FloatField()
    operational_kg = serializers.FloatField()
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e of unoccupied GPU-hours (kg).")
    cost = serializers.DecimalField(max_digits=16, decimal_places=6)


class PeriodSerializer(serializers.Serializer):
    period = serializers.DateField(help_text="First day of the period.")
    energy_j = serializers.FloatField(help_text="GPU energy of the jobs (J).")
    gpu_hours = serializers.FloatField(help_text="GPU-hours the jobs occupied (h).")
    facility_kwh = serializers.FloatField(help_text="Facility energy (kWh).")
    operational_kg = serializers.FloatField(help_text="Operational CO2e (kg).")
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e (kg).")
    cost = serializers.DecimalField(max_digits=16, decimal_places=6, help_text="In `currency`.")
    energy_by_method_j = serializers.DictField(child=serializers.FloatField(), help_text="Joules per split method.")
    idle = IdleLineSerializer(allow_null=True, help_text="The idle line (clusters; teams when shared back).")


class RollupSerializer(serializers.Serializer):
    granularity = serializers.CharField()
    currency = serializers.CharField(help_text="ISO 4217.")
    intensity_basis = serializers.CharField(help_text="location, market or marginal; never mixed.")
    intensity_zones = serializers.ListField(child=serializers.CharField())
    periods = PeriodSerializer(many=True)
    embodied_kg_per_useful_gpu_hour = serializers.FloatField(required=False, allow_null=True)


class DailyEnergySerializer(serializers.Serializer):
    day = serializers.DateField()
    team = serializers.CharField()
    method = serializers.CharField(help_text="Split method.")
    energy_j = serializers.FloatField(help_text="GPU energy (J).")


class TeamTotalsSerializer(serializers.Serializer):
    team = serializers.CharField()
    gpu_hours = serializers.FloatField(help_text="GPU-hours occupied (h).")
    energy_j = serializers.FloatField(help_text="GPU energy (J).")
    facility_kwh = serializers.FloatField(help_text="Facility energy (kWh).")
    operational_kg = serializers.FloatField(help_text="Operational CO2e (kg).")
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e (kg).")
    cost = serializers.DecimalField(max_digits=18, decimal_places=6, help_text="In the sites' currency.")


class OutcomeFiguresSerializer(serializers.Serializer):
    jobs = serializers.IntegerField(help_text="Runs with GPU-hours in the period.")
    energy_j = serializers.FloatField(help_text="GPU energy (J).")
    energy_kwh = serializers.FloatField(help_text="GPU energy (kWh).")
    gpu_hours = serializers.FloatField(help_text="GPU-hours occupied (h).")
    facility_kwh = serializers.FloatField(help_text="Facility energy (kWh).")
    operational_kg = serializers.FloatField(help_text="Operational CO2e (kg).")
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e (kg).")
    co2e_kg = serializers.FloatField(help_text="Operational + embodied CO2e (kg).")
    cost = serializers.DecimalField(max_digits=18, decimal_places=6, help_text="In `currency`.")


class OutcomeSerializer(OutcomeFiguresSerializer):
    outcome = serializers.ChoiceField(
        choices=["completed", "failed", "cancelled", "other"],
        help_text="completed; failed (failed, timeout, out_of_memory, node_fail); cancelled (cancelled, "
        "preempted); other (running, pending, unknown).",
    )
    label = serializers.CharField(help_text="The outcome in words.")  # type: ignore[assignment]  # DRF's metaclass moves it out of the class


class JobGroupOutcomesSerializer(serializers.Serializer):
    job_group = serializers.CharField(help_text="The job group's name.")
    currency = serializers.CharField(help_text="ISO 4217.")
    intensity_basis = serializers.CharField(help_text="location, market or marginal; never mixed.")
    intensity_zones = serializers.ListField(child=serializers.CharField(), help_text="Grid zones of its runs.")
    outcomes = OutcomeSerializer(many=True, help_text="Always the four outcomes, in this order.")
    total = OutcomeFiguresSerializer(help_text="Every run of the period, whatever its outcome.")
    failed_cost_share = serializers.FloatField(
        allow_null=True, help_text="The failed runs' share of the cost (0 to 1); null without cost."
    )
