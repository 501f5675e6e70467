"""The per-token figures' query and answer (apps.jobs.per_token): every quantity with its unit in its name."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.core.units.money import money_text
from apps.core.web.fields import MinorUnitMoneyField
from apps.jobs.per_token import GROUPS, PerToken
from apps.rollups.api.serializers import PeriodQuerySerializer


class WorkQuerySerializer(PeriodQuerySerializer):
    group_by = serializers.ChoiceField(
        choices=GROUPS, default="model", help_text="One line per model, team or cluster."
    )
    team = serializers.CharField(required=False, max_length=100, help_text="Only this team's jobs (its name).")
    cluster = serializers.CharField(required=False, max_length=100, help_text="Only this cluster's jobs (its name).")


class PerTokenSerializer(serializers.Serializer):
    """One group's work served over the period and its figures per token (docs/arithmetic.md, "Per token served")."""

    group_by = serializers.CharField(help_text="model, team or cluster: what `name` is.")
    name = serializers.CharField(
        allow_null=True, help_text="The model (null: the engine names none, as TGI), team or cluster."
    )
    output_tokens = serializers.FloatField(help_text="Tokens generated (engines' counters, jobs with a measured hour).")
    prompt_tokens = serializers.FloatField(help_text="Prompt (prefill) tokens processed.")
    requests = serializers.FloatField(help_text="Requests served.")
    jobs = serializers.IntegerField(help_text="Serving jobs counted.")
    energy_j = serializers.FloatField(help_text="GPU energy of those jobs over the period, shared by model (J).")
    energy_j_per_1k_tokens = serializers.FloatField(allow_null=True, help_text="J per 1,000 output tokens.")
    energy_wh_per_1k_tokens = serializers.FloatField(allow_null=True, help_text="Wh per 1,000 output tokens.")
    co2e_kg = serializers.FloatField(
        allow_null=True, help_text="Operational + embodied CO2e (kg); null where no hour had a grid intensity."
    )
    co2e_g_per_1k_tokens = serializers.FloatField(allow_null=True, help_text="g CO2e per 1,000 output tokens.")
    cost = MinorUnitMoneyField(
        allow_null=True,
        help_text="Billed: the sum of the jobs' costs, each rounded to the currency's minor unit first (shared by "
        "model with the rounded parts adding up to it). Null where the group spans currencies.",
    )
    currency = serializers.CharField(help_text="ISO 4217 currency of `cost` (several, comma-separated: no cost).")
    cost_per_million_tokens = serializers.DecimalField(
        max_digits=20, decimal_places=4, allow_null=True, help_text="`cost` per 1,000,000 output tokens (4 places)."
    )
    unmetered_output_tokens = serializers.FloatField(
        help_text="Output tokens of jobs with no measured hour in the period: counted apart, in no figure above."
    )


def per_token_row(group: PerToken, *, group_by: str) -> dict[str, Any]:
    """A group as PerTokenSerializer documents it (money as text in its currency's minor unit)."""
    cost = group.billed_cost
    per_million = group.cost_per_million_tokens
    return {
        "group_by": group_by,
        "name": group.group or None,
        "output_tokens": group.served.output_tokens,
        "prompt_tokens": group.served.prompt_tokens,
        "requests": group.served.requests,
        "jobs": group.jobs,
        "energy_j": group.energy_j,
        "energy_j_per_1k_tokens": group.energy_j_per_1k_tokens,
        "energy_wh_per_1k_tokens": group.energy_wh_per_1k_tokens,
        "co2e_kg": group.co2e_kg,
        "co2e_g_per_1k_tokens": group.co2e_g_per_1k_tokens,
        "cost": None if cost is None else money_text(cost, group.currency),
        "currency": group.currency,
        "cost_per_million_tokens": None if per_million is None else str(per_million),
        "unmetered_output_tokens": group.unmetered.output_tokens,
    }
