"""The weekly report's number formats as template filters (apps.reports.formatting)."""

from __future__ import annotations

from django import template

from apps.reports import formatting

register = template.Library()

for _name in ("money", "qty", "change_pct", "textbar", "pct", "ratio_pct", "words"):
    register.filter(_name, getattr(formatting, _name))
