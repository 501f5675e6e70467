"""Finding filters, shared by the API and the audit queue page."""

from __future__ import annotations

from datetime import timedelta

import django_filters
from django.db.models import QuerySet
from django.utils import timezone

from apps.core.web.filtersets import FilterSet, IdChoiceFilter, WholeNumberFilter
from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job

from .kinds import KIND_CHOICES, STATUS_CHOICES
from .models import AuditEntry, Flag


class FlagFilterSet(FilterSet):
    kind = django_filters.ChoiceFilter(choices=KIND_CHOICES)
    status = django_filters.ChoiceFilter(choices=STATUS_CHOICES)
    team = django_filters.ModelChoiceFilter(field_name="job__team", queryset=Team.objects.all(), to_field_name="name")
    cluster = django_filters.ModelChoiceFilter(queryset=Cluster.objects.all(), to_field_name="name")
    older_than_days = WholeNumberFilter(
        method="filter_age", min_value=0, max_value=3650, help_text="Raised at least this many days ago (0..3650)."
    )

    class Meta:
        model = Flag
        fields = ["kind", "status", "team", "cluster", "older_than_days"]

    def filter_age(self, qs: QuerySet[Flag], name: str, value: int) -> QuerySet[Flag]:
        return qs.filter(created_at__lte=timezone.now() - timedelta(days=value))


class AuditEntryFilterSet(FilterSet):
    """The audit log's filters: a decision's action, a job's trail (the job by id)."""

    action = django_filters.ChoiceFilter(choices=AuditEntry.Action.choices)
    job = IdChoiceFilter(queryset=Job.objects.all(), help_text="The job's id: its trail.")

    class Meta:
        model = AuditEntry
        fields = ["action", "job"]
