"""Query parameters and schema of the frontier of recurring workloads (docs/api.md, "The frontier of a recurring
workload"): `/api/job-groups/{id}/frontier/` and `/api/frontier/`. The documents are built by the views from
apps.carbon.frontier_selectors and written through these serializers, so the answer is what the schema says."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import serializers

from apps.carbon.frontier_selectors import GroupFrontier, GroupSaving
from apps.core.units.money import round_minor
from apps.core.web import params
from apps.core.web.fields import MinorUnitMoneyField, MonthField
from apps.jobs.frontier import J_PER_KWH, MIN_RUNS_DEFAULT, SLACK_DEFAULT, Point

MIN_RUNS_MAX = 1_000


class ShareField(serializers.CharField):
    """A share from 0 to 1 in digits with an optional decimal point (`0.1`), read as apps.core.web.params reads
    amounts."""

    def to_internal_value(self, data: Any) -> float:  # type: ignore[override]  # a number, not the text
        try:
            value = params.amount(data, name="")
        except params.QueryError:
            raise serializers.ValidationError(f"A share from 0 to 1 in digits, e.g. 0.1 (got {data!r}).") from None
        if value > 1:
            raise serializers.ValidationError(f"A share from 0 to 1 in digits, e.g. 0.1 (got {data!r}).")
        return float(value)


class MinRunsField(serializers.CharField):
    """A whole number of runs (apps.core.web.params.whole_number)."""

    def to_internal_value(self, data: Any) -> int:  # type: ignore[override]  # a number, not the text
        try:
            return params.whole_number(data, name="", low=1, high=MIN_RUNS_MAX)
        except params.QueryError as exc:
            raise serializers.ValidationError(exc.sentence) from None


class FrontierQuerySerializer(serializers.Serializer):
    slack = ShareField(
        required=False,
        help_text=f"How much longer per unit the advised limit may take than the current one (0 to 1; default "
        f"{SLACK_DEFAULT}).",
    )
    min_runs = MinRunsField(
        required=False,
        help_text=f"Runs a limit needs before it is advised (1 to {MIN_RUNS_MAX}; default {MIN_RUNS_DEFAULT}).",
    )


class FleetFrontierQuerySerializer(FrontierQuerySerializer):
    month = MonthField(help_text="The month whose finished runs the saving counts (UTC), YYYY-MM, e.g. 2026-11.")
    team = serializers.CharField(required=False, help_text="Only this team's runs (its name).")


class PointSerializer(serializers.Serializer):
    cap_w = serializers.FloatField(help_text="The power limit (W).")
    runs = serializers.IntegerField(help_text="The group's runs at this limit.")
    s_per_unit = serializers.FloatField(help_text="Median wall seconds per unit of work of its runs.")
    s_per_unit_low = serializers.FloatField(help_text="Its first quartile.")
    s_per_unit_high = serializers.FloatField(help_text="Its third quartile.")
    j_per_unit = serializers.FloatField(help_text="Median GPU joules per unit of work of its runs.")
    j_per_unit_low = serializers.FloatField(help_text="Its first quartile.")
    j_per_unit_high = serializers.FloatField(help_text="Its third quartile.")
    on_front = serializers.BooleanField(help_text="No other limit is as fast and as frugal, and better on one.")


class AdviceSerializer(serializers.Serializer):
    cap_w = serializers.FloatField(help_text="The advised limit (W); the current one where nothing beats it.")
    current_cap_w = serializers.FloatField(help_text="The limit most of the group's runs ran at (W).")
    energy_change_pct = serializers.FloatField(help_text="Energy per unit at the advised limit against the current.")
    time_change_pct = serializers.FloatField(help_text="Time per unit at the advised limit against the current.")
    runs = serializers.IntegerField(help_text="The advised limit's runs.")
    current_runs = serializers.IntegerField(help_text="The current limit's runs.")


class PlanSerializer(serializers.Serializer):
    caps_w = serializers.ListField(child=serializers.FloatField(), help_text="The limits to try (W), highest first.")
    measured_w = serializers.FloatField(help_text="The limit its runs already ran at (W).")
    warmup_steps = serializers.IntegerField(help_text="Units to settle at each limit before measuring.")
    profile_steps = serializers.IntegerField(help_text="Units measured at each limit.")
    trial_units = serializers.FloatField(help_text="The units at the limits not tried yet.")
    trial_s = serializers.FloatField(help_text="Their time at the current pace (s).")
    trial_kwh = serializers.FloatField(help_text="Their GPU energy at the current energy per unit (kWh).")


class GroupFrontierSerializer(serializers.Serializer):
    job_group = serializers.CharField(help_text="The job group's name.")
    job_group_id = serializers.IntegerField(help_text="The job group's id (/api/job-groups/{id}/).")
    unit = serializers.CharField(
        help_text="The unit of work most of its runs count (their own counter's, or reported)."
    )
    slack = serializers.FloatField(
        help_text="The time slack asked for: the advice's time per unit at most 1 + slack times the current."
    )
    min_runs = serializers.IntegerField(help_text="The runs a limit needs before it is advised (or advised against).")
    gpu_model = serializers.CharField(help_text="The GPU model most of its GPU-hours ran on.")
    tdp_w = serializers.FloatField(allow_null=True, help_text="That model's TDP in the fleet config; null: not named.")
    runs = serializers.IntegerField(help_text="Its finished runs the user may see.")
    varied_runs = serializers.IntegerField(help_text="Runs whose power limit changed inside them: at no one limit.")
    unknown_cap_runs = serializers.IntegerField(help_text="Runs whose power limit nobody exported.")
    other_unit_runs = serializers.IntegerField(help_text="Runs that counted another unit, or none.")
    points = PointSerializer(many=True, help_text="One per power limit, highest first.")
    current_cap_w = serializers.FloatField(allow_null=True, help_text="The limit most runs ran at (W).")
    advice = AdviceSerializer(allow_null=True, help_text="Null: a plan instead, or not enough runs yet.")
    plan = PlanSerializer(allow_null=True, help_text="Where every run ran at one limit: how to measure others.")
    text = serializers.CharField(help_text="The advice, the plan, or why there is neither, as the pages write it.")


class SavingSerializer(serializers.Serializer):
    runs = serializers.IntegerField(help_text="The month's runs not at the advised limit.")
    units = serializers.FloatField(help_text="Their units of work.")
    gpu_kwh = serializers.FloatField(help_text="GPU energy they would have saved (negative: used more).")
    facility_kwh = serializers.FloatField(allow_null=True)
    co2e_kg = serializers.FloatField(allow_null=True, help_text="Operational, at the runs' own kg per facility kWh.")
    cost = MinorUnitMoneyField(
        allow_null=True,
        help_text="The electricity's, at the runs' sites' price, in the currency's minor unit (totals: the groups' "
        "rounded costs added up).",
    )
    currency = serializers.CharField(help_text="ISO 4217 currency of `cost` (several, comma-separated: no cost).")
    extra_h = serializers.FloatField(help_text="The longer wall time it would have cost (h).")
    extra_gpu_h = serializers.FloatField(help_text="The same in GPU-hours held.")


class GroupSavingSerializer(GroupFrontierSerializer):
    saving = SavingSerializer(help_text="What its advice would have saved in the month.")


class FleetFrontierSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="The month (UTC), YYYY-MM.")
    slack = serializers.FloatField(help_text="The time slack asked for.")
    min_runs = serializers.IntegerField(help_text="The runs a limit needs before it is advised.")
    groups = GroupSavingSerializer(many=True, help_text="Each recurring group with runs in the month.")
    totals = SavingSerializer(help_text="The groups' savings added up; cost null across currencies.")


def _point(p: Point) -> dict[str, Any]:
    return {
        "cap_w": p.cap_w, "runs": p.runs,
        "s_per_unit": p.s_per_unit.median, "s_per_unit_low": p.s_per_unit.low, "s_per_unit_high": p.s_per_unit.high,
        "j_per_unit": p.j_per_unit.median, "j_per_unit_low": p.j_per_unit.low, "j_per_unit_high": p.j_per_unit.high,
        "on_front": p.on_front,
    }  # fmt: skip


def frontier_document(entry: GroupFrontier) -> dict[str, Any]:
    f = entry.frontier
    advice = f.advice
    plan = f.plan
    return {
        "job_group": entry.group.name, "job_group_id": entry.group.pk, "unit": f.unit, "slack": f.slack,
        "min_runs": f.min_runs, "gpu_model": entry.gpu_model, "tdp_w": entry.tdp_w, "runs": entry.runs,
        "varied_runs": f.varied_runs, "unknown_cap_runs": f.unknown_runs, "other_unit_runs": entry.other_unit_runs,
        "points": [_point(p) for p in f.points],
        "current_cap_w": f.current.cap_w if f.current else None,
        "advice": None if advice is None else {
            "cap_w": advice.chosen.cap_w, "current_cap_w": advice.current.cap_w,
            "energy_change_pct": advice.energy_change_pct, "time_change_pct": advice.time_change_pct,
            "runs": advice.chosen.runs, "current_runs": advice.current.runs,
        },
        "plan": None if plan is None else {
            "caps_w": plan.caps_w, "measured_w": plan.measured_w, "warmup_steps": plan.warmup_steps,
            "profile_steps": plan.profile_steps, "trial_units": plan.trial_units, "trial_s": plan.trial_s,
            "trial_kwh": plan.trial_j / J_PER_KWH,
        },
        "text": f.text,
    }  # fmt: skip


def saving_document(found: GroupSaving) -> dict[str, Any]:
    s = found.saving
    return {
        **frontier_document(found.entry),
        "saving": {
            "runs": s.runs, "units": s.units, "gpu_kwh": found.gpu_kwh, "facility_kwh": found.facility_kwh,
            "co2e_kg": found.co2e_kg, "cost": _minor(found.cost, found.currency), "currency": found.currency,
            "extra_h": s.extra_s / 3600, "extra_gpu_h": s.extra_gpu_h,
        },
    }  # fmt: skip


def _minor(cost: Decimal | None, currency: str) -> Decimal | None:
    """A cost in its currency's minor unit, as every money figure of the API (apps.core.units.money)."""
    return None if cost is None else round_minor(cost, currency)


def totals_document(groups: list[GroupSaving]) -> dict[str, Any]:
    """The groups' savings added up: a figure null where one group's is, the cost null across currencies."""

    def added(values: list[Any]) -> Any:
        return None if any(v is None for v in values) else sum(values)

    currencies = {g.currency for g in groups if g.saving.runs}
    costs = [_minor(g.cost, g.currency) for g in groups if g.saving.runs]
    return {
        "runs": sum(g.saving.runs for g in groups), "units": sum(g.saving.units for g in groups),
        "gpu_kwh": sum(g.gpu_kwh for g in groups),
        "facility_kwh": added([g.facility_kwh for g in groups if g.saving.runs]) or 0.0,
        "co2e_kg": added([g.co2e_kg for g in groups if g.saving.runs]),
        "cost": added(costs) if len(currencies) <= 1 else None,
        "currency": ",".join(sorted(currencies)),
        "extra_h": sum(g.saving.extra_s for g in groups) / 3600,
        "extra_gpu_h": sum(g.saving.extra_gpu_h for g in groups),
    }  # fmt: skip
