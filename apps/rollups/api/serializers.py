"""Query parameters and schema of the rollup endpoints."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from rest_framework import serializers

from apps.core.web.fields import MomentField, MonthField, WeekField
from apps.core.web.params import month_after

MAX_ROLLUP_DAYS = 400


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


class PeriodQuerySerializer(serializers.Serializer):
    start = MomentField(
        required=False, help_text="Period start (ISO 8601 date or time, UTC if no zone); or give `month` or `week`."
    )
    end = MomentField(required=False, help_text="Period end, exclusive.")
    month = MonthField(
        required=False, help_text="Instead of start and end: a calendar month (UTC), YYYY-MM, e.g. 2026-11."
    )
    week = WeekField(
        required=False, help_text="Instead of start and end: an ISO week (Monday to Monday, UTC), e.g. 2026-W48."
    )

    def validate(self, attrs: dict) -> dict:
        shortcuts = [k for k in ("month", "week") if attrs.get(k)]
        if shortcuts:
            if len(shortcuts) > 1 or attrs.get("start") or attrs.get("end"):
                raise serializers.ValidationError("Give start and end, or month, or week: one of them.")
            first: date = attrs.pop(shortcuts[0])
            after = month_after(first) if shortcuts[0] == "month" else first + timedelta(days=7)
            attrs["start"], attrs["end"] = _midnight(first), _midnight(after)
        missing = {k: "This field is required (or give month or week)." for k in ("start", "end") if not attrs.get(k)}
        if missing:
            raise serializers.ValidationError(missing)
        if attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError("start must be before end.")
        if attrs["end"] - attrs["start"] > timedelta(days=MAX_ROLLUP_DAYS):
            raise serializers.ValidationError(f"A rollup covers at most {MAX_ROLLUP_DAYS} days.")
        return attrs


class RollupQuerySerializer(PeriodQuerySerializer):
    granularity = serializers.ChoiceField(choices=["day", "week", "month"], default="day")
    totals = serializers.BooleanField(
        default=True,
        help_text="CSV: end with a `total` row, the periods added up (its `cost` the sum of theirs); `false` leaves "
        "it out. JSON always has `totals`.",
    )


# Amounts in minor units (`cost`) are declared with up to 3 places: ISO 4217 exponents are 0 (JPY), 2 (EUR,
# USD) or 3 (KWD); the answer has exactly the currency's (apps/core/units/money.py).
class FiguresSerializer(serializers.Serializer):
    """The figures every line of a rollup carries: energy, GPU-hours, carbon and money."""

    energy_j = serializers.FloatField(help_text="GPU energy (J).")
    energy_kwh = serializers.FloatField(help_text="GPU energy (kWh).")
    gpu_hours = serializers.FloatField(help_text="GPU-hours occupied (h).")
    facility_kwh = serializers.FloatField(help_text="Facility energy (kWh).")
    operational_kg = serializers.FloatField(help_text="Operational CO2e (kg).")
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e (kg).")
    cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=3,
        help_text="In the currency's minor unit: the sum of its jobs' rounded costs (docs/api.md, Money).",
    )
    cost_exact = serializers.DecimalField(max_digits=18, decimal_places=6, help_text="Exact, 6 places, in `currency`.")


class IdleLineSerializer(FiguresSerializer):
    energy_j = serializers.FloatField(help_text="GPU energy outside every job (J).")
    energy_kwh = serializers.FloatField(help_text="GPU energy outside every job (kWh).")
    gpu_hours = serializers.FloatField(help_text="GPU-hours no job occupied (h).")
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e of unoccupied GPU-hours (kg).")
    cost = serializers.DecimalField(
        max_digits=18, decimal_places=3, help_text="`cost_exact` rounded half-even to the currency's minor unit."
    )


class UnobservedLineSerializer(FiguresSerializer):
    energy_j = serializers.FloatField(help_text="Energy of the idle line nobody saw: gaps no job was charged (J).")
    energy_kwh = serializers.FloatField(help_text="Energy of the idle line nobody saw (kWh).")
    gpu_hours = serializers.FloatField(help_text="GPU-hours of the idle line nobody saw (h).")
    embodied_kg = serializers.FloatField(help_text="Embodied CO2e of those GPU-hours (kg).")
    cost = serializers.DecimalField(
        max_digits=18, decimal_places=3, help_text="`cost_exact` rounded half-even to the currency's minor unit."
    )


class WasteLineSerializer(FiguresSerializer):
    energy_j = serializers.FloatField(help_text="GPU energy of the team's counted findings' job rows (J).")
    energy_kwh = serializers.FloatField(help_text="The same in kWh.")
    gpu_hours = serializers.FloatField(help_text="GPU-hours blocked: each GPU-hour once, however many findings (h).")
    cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=3,
        help_text="`cost_exact` rounded half-even to the currency's minor unit (the totals' too: waste is no bill).",
    )


class EnergyBandSerializer(serializers.Serializer):
    """The interval of a line's GPU energy (docs/accuracy.md, "Sums")."""

    energy_low_j = serializers.FloatField(
        allow_null=True,
        help_text="Low end of energy_j's interval (J): its job-GPU-hours' lows added up, exact ones (one job on its "
        "GPU) as they are; energy_j itself where all are exact. Null where a day's is not known (stored before "
        "the interval was, its hour rows since past retention).",
    )
    energy_high_j = serializers.FloatField(allow_null=True, help_text="High end of energy_j's interval (J).")
    energy_low_kwh = serializers.FloatField(allow_null=True, help_text="energy_low_j in kWh.")
    energy_high_kwh = serializers.FloatField(allow_null=True, help_text="energy_high_j in kWh.")


class PeriodSerializer(FiguresSerializer, EnergyBandSerializer):
    period = serializers.DateField(help_text="First day of the period.")
    energy_by_method_j = serializers.DictField(child=serializers.FloatField(), help_text="Joules per split method.")
    idle = IdleLineSerializer(allow_null=True, help_text="The idle line (clusters; teams when shared back).")
    unobserved = UnobservedLineSerializer(
        allow_null=True,
        help_text="The part of `idle` nobody saw (idle seen with no job = idle - unobserved); null without `idle`.",
    )
    waste = WasteLineSerializer(
        allow_null=True,
        help_text="A team's waste in the period: its open and disputed findings' job rows inside it, a GPU-hour "
        "two findings share once (as its page and weekly report count it); null in cluster and job group rollups.",
    )


class TotalsSerializer(FiguresSerializer, EnergyBandSerializer):
    cost = serializers.DecimalField(max_digits=18, decimal_places=3, help_text="Sum of the periods' `cost`.")
    idle = IdleLineSerializer(allow_null=True, help_text="The periods' idle lines added up; null without one.")
    unobserved = UnobservedLineSerializer(
        allow_null=True, help_text="The periods' `unobserved` added up; null without an idle line."
    )
    waste = WasteLineSerializer(
        allow_null=True,
        help_text="The periods' waste added up (`cost`: `cost_exact` rounded, the team page's figure for the same "
        "days); null in cluster and job group rollups.",
    )


class RollupSerializer(serializers.Serializer):
    granularity = serializers.CharField()
    currency = serializers.CharField(help_text="ISO 4217.")
    intensity_basis = serializers.CharField(help_text="location, market or marginal; never mixed.")
    intensity_zones = serializers.ListField(child=serializers.CharField())
    periods = PeriodSerializer(many=True)
    totals = TotalsSerializer(help_text="The periods added up: `cost` is the sum of theirs.")
    embodied_kg_per_useful_gpu_hour = serializers.FloatField(required=False, allow_null=True)


class DailyEnergySerializer(serializers.Serializer):
    day = serializers.DateField()
    team = serializers.CharField()
    method = serializers.CharField(help_text="Split method.")
    energy_j = serializers.FloatField(help_text="GPU energy (J).")
    energy_kwh = serializers.FloatField(help_text="GPU energy (kWh).")


class TeamTotalsSerializer(FiguresSerializer):
    team = serializers.CharField(help_text="The team's name (a slug).")
    display_name = serializers.CharField(help_text="The team's name as people read it (its name where it has none).")
    currency = serializers.CharField(help_text="ISO 4217, as the team's rollup names it.")
    period_start = serializers.DateField(help_text="The first UTC day summed.")
    period_end = serializers.DateField(help_text="The day after the last one summed (exclusive).")
    cost_minor = serializers.IntegerField(
        help_text="`cost` as a whole number of the currency's minor units (cents for EUR, yen for JPY: ISO 4217)."
    )


class OutcomeFiguresSerializer(FiguresSerializer):
    jobs = serializers.IntegerField(help_text="Runs with GPU-hours in the period.")
    co2e_kg = serializers.FloatField(help_text="Operational + embodied CO2e (kg).")
    cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=3,
        help_text="In the currency's minor unit: the sum of the runs' costs in the period, each rounded "
        "(the total's: the sum of the outcomes').",
    )


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
