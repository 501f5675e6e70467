"""Report filters, shared by the API and the archive page."""

from __future__ import annotations

import django_filters

from apps.core.web.filtersets import DayFilter, FilterSet
from apps.fleet.models import Team

from .models import WeeklyReport


class WeeklyReportFilterSet(FilterSet):
    team = django_filters.ModelChoiceFilter(queryset=Team.objects.all(), to_field_name="name")
    fleet = django_filters.BooleanFilter(
        field_name="team", lookup_expr="isnull", help_text="true: the fleet summaries."
    )
    status = django_filters.ChoiceFilter(choices=WeeklyReport.Status.choices)
    week_start = DayFilter()
    since = DayFilter(field_name="week_start", lookup_expr="gte", help_text="Weeks from this Monday on.")

    class Meta:
        model = WeeklyReport
        fields = ["team", "fleet", "status", "week_start", "since"]
