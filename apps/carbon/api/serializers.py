"""Query parameters and schema of /api/when-to-run/ (docs/api.md, "When to run"). The documents are built by the
view from apps.carbon.when_selectors and written through these serializers, so the answer is what the schema says."""

from __future__ import annotations

from datetime import timedelta

from rest_framework import serializers

from apps.core.web.fields import MomentField

MAX_PAST_DAYS = 92
PAST_DAYS_DEFAULT = 7


class WhenToRunQuerySerializer(serializers.Serializer):
    start = MomentField(
        required=False,
        help_text="The hints of record made from (ISO 8601 date or time, UTC if no zone); default: "
        f"{PAST_DAYS_DEFAULT} days before `end`.",
    )
    end = MomentField(required=False, help_text="... and before (exclusive); default: now.")

    def validate(self, attrs: dict) -> dict:
        if attrs.get("start") and attrs.get("end") and attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError("start must be before end.")
        if attrs.get("start") and attrs.get("end") and attrs["end"] - attrs["start"] > timedelta(days=MAX_PAST_DAYS):
            raise serializers.ValidationError(f"At most {MAX_PAST_DAYS} days of hints of record.")
        return attrs


class TypicalRunSerializer(serializers.Serializer):
    runs = serializers.IntegerField(help_text="How many of the team's recent runs of the group it is made from.")
    length_h = serializers.IntegerField(help_text="Its length (h): the median run's.")
    facility_kwh = serializers.FloatField(help_text="Its facility energy (kWh).")
    facility_kwh_by_hour = serializers.ListField(
        child=serializers.FloatField(), help_text="Its facility energy in each hour from its start (kWh)."
    )


class ForecastSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["imported", "profile"],
        help_text="`imported`: a forecast imported with import_forecast; `profile`: the zone's mean by UTC hour of the "
        "week over the last weeks of stored intensity (labelled so).",
    )
    # A field named "source" (DRF's metaclass takes it out of the class; mypy sees Field.source).
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="Where it comes from: the import's source, or which weeks of which figures."
    )
    start = serializers.DateTimeField(help_text="The hour of its first value (UTC).")
    kg_per_kwh = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        help_text="Each hour's intensity from `start` to the deadline (kg CO2e/kWh); null: not known.",
    )


class HintSerializer(serializers.Serializer):
    job_group = serializers.CharField()
    zone = serializers.CharField(help_text="The grid zone of the runs' site.")
    basis = serializers.CharField(help_text="The intensity basis of the runs' site.")
    typical_run = TypicalRunSerializer(help_text="The group's typical run, from the team's recent runs of it.")
    forecast = ForecastSerializer(help_text="The forecast the hint was made by.")
    best_start = serializers.DateTimeField(
        allow_null=True, help_text="The cleanest start by the forecast within the deadline (UTC); null: no hint."
    )
    now_kg = serializers.FloatField(
        allow_null=True, help_text="kg CO2e of the typical run started now, by the forecast."
    )
    best_kg = serializers.FloatField(allow_null=True, help_text="... started at `best_start`.")
    saving_kg = serializers.FloatField(allow_null=True, help_text="`now_kg - best_kg`.")
    saving_pct = serializers.FloatField(allow_null=True, help_text="`saving_kg` in % of `now_kg`.")
    text = serializers.CharField(
        help_text='The hint as the pages show it ("start after 02:00 UTC (...): \u22121.2 kg, \u221218 %").'
    )


class PastHintSerializer(serializers.Serializer):
    job_group = serializers.CharField()
    zone = serializers.CharField(help_text="The grid zone of the runs' site.")
    made_at = serializers.DateTimeField(help_text="The hour it looked forward from (UTC).")
    best_start = serializers.DateTimeField(help_text="The start it gave (UTC).")
    forecast_kind = serializers.CharField(help_text="`imported` or `profile`, as in a hint's `forecast.kind`.")
    forecast_source = serializers.CharField(help_text="Where its forecast came from, as in a hint's `forecast.source`.")
    claimed_kg = serializers.FloatField(help_text="What it said starting at `best_start` would save, by its forecast.")
    claimed_pct = serializers.FloatField(allow_null=True, help_text="`claimed_kg` in % of the run started at once.")
    real_kg = serializers.FloatField(
        allow_null=True,
        help_text="What starting there would have saved by the intensity that came; null: not come yet.",
    )
    real_pct = serializers.FloatField(allow_null=True, help_text="`real_kg` in % of the run started at once.")
    best_real_kg = serializers.FloatField(
        allow_null=True,
        help_text="The best that could have been saved in hindsight (the measured shift saving of its typical run); "
        "null until the whole window's intensity has come.",
    )
    forecast_error_pct = serializers.FloatField(
        allow_null=True, help_text="sum |forecast - came| / sum came over the window's hours both know (%)."
    )
    hours_compared = serializers.IntegerField(
        help_text="The window's hours whose forecast and intensity are both known."
    )


class GroupSummarySerializer(serializers.Serializer):
    job_group = serializers.CharField()
    zone = serializers.CharField(help_text="The grid zone of the runs' site.")
    hints = serializers.IntegerField(help_text="Hints of record of the period.")
    checked = serializers.IntegerField(help_text="Of them, those whose intensity has come.")
    claimed_kg = serializers.FloatField(help_text="What the checked hints claimed, added up.")
    real_kg = serializers.FloatField(help_text="What the same starts would have saved by the intensity that came.")
    best_real_kg = serializers.FloatField(allow_null=True, help_text="The best in hindsight, added up.")
    runs = serializers.IntegerField(help_text="The team's runs of the group that ended in the period.")
    measured_shift_kg = serializers.FloatField(
        allow_null=True, help_text="Their measured shift saving (the jobs' `shift_saving_kg`) added up."
    )


class WhenToRunSerializer(serializers.Serializer):
    team = serializers.CharField(help_text="The team's name.")
    team_id = serializers.IntegerField(help_text="The team's id.")
    made_at = serializers.DateTimeField(help_text="The hour the hints look forward from (UTC).")
    deadline_h = serializers.IntegerField(help_text="FLEETWATT_SHIFT_DEADLINE_H: a run must end within it.")
    hints = HintSerializer(many=True, help_text="One per flexible job group the team ran in the last weeks.")
    past_start = serializers.DateTimeField(help_text="The period of the hints of record: from (UTC) ...")
    past_end = serializers.DateTimeField(help_text="... and before (exclusive).")
    past_hints = PastHintSerializer(many=True, help_text="The hints of record made in the period, the latest first.")
    summary = GroupSummarySerializer(many=True, help_text="Per job group: the period's hints checked, and its runs.")
