"""Filters of the when-to-run hints on the team page and in the weekly e-mail: a saving written as the change it
makes ("-1.2 kg", "+0.3 kg" where a start cost more), unknown as "not known"."""

from __future__ import annotations

from typing import Any

from django import template

from apps.carbon.when_to_run import MINUS, kg_text

register = template.Library()


@register.filter
def saving_kg(value: Any) -> str:
    """A saving in kg as a change: "-1.2 kg"; "+0.3 kg" where it cost more; "not known" where unknown (None)."""
    if value is None:
        return "not known"
    kg = float(value)
    if kg == 0:
        return "0 kg"
    return f"{MINUS if kg > 0 else '+'}{kg_text(abs(kg))} kg"


@register.filter
def saving_pct(value: Any) -> str:
    """A saving in % as a change: "-18 %", "+3 %"; "" where unknown."""
    if value is None:
        return ""
    pct = float(value)
    return "0 %" if round(pct) == 0 else f"{MINUS if pct > 0 else '+'}{abs(pct):.0f} %"
