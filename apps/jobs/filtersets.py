"""Job filters, shared by the API and the dashboards."""

from __future__ import annotations

from datetime import datetime, timedelta

import django_filters
from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError

from apps.core.web.filtersets import FilterSet, MomentFilter, TextFilter
from apps.fleet.models import Cluster, Team

from .models import Job, JobQuerySet
from .states import STATE_CHOICES

MAX_RANGE_DAYS = 400


class JobFilterSet(FilterSet):
    cluster = django_filters.ModelChoiceFilter(
        queryset=Cluster.objects.all(), to_field_name="name", help_text="Cluster name."
    )
    team = django_filters.ModelChoiceFilter(queryset=Team.objects.all(), to_field_name="name", help_text="Team name.")
    start = MomentFilter(method="filter_seen_since", help_text="Jobs still running at or after this time (ISO 8601).")
    end = MomentFilter(field_name="start", lookup_expr="lt", help_text="Jobs started before this time.")
    flagged = django_filters.BooleanFilter(
        method="filter_flagged", help_text="Only jobs with (true) or without (false) flags."
    )
    flag = TextFilter(method="filter_flag", help_text="Only jobs with this kind of flag.")
    job_id = TextFilter(help_text="The scheduler's job id (exact).")
    user = TextFilter(help_text="User who ran the job (exact).")
    state = django_filters.ChoiceFilter(choices=STATE_CHOICES, help_text="The scheduler's state of the job.")
    partition = TextFilter(help_text="Scheduler partition (exact).")
    account = TextFilter(help_text="Slurm account (exact).")

    class Meta:
        model = Job
        fields = [
            "cluster", "team", "start", "end", "flagged", "flag", "attribution", "scheduler",
            "job_id", "user", "state", "partition", "account",
        ]  # fmt: skip

    @property
    def qs(self) -> QuerySet[Job]:
        if self.is_bound:
            self.form.is_valid()  # its cleaned data exists once validated (django-filter's own qs validates first)
            start, end = self.form.cleaned_data.get("start"), self.form.cleaned_data.get("end")
            if start and end and end - start > timedelta(days=MAX_RANGE_DAYS):
                raise ValidationError({"end": f"A range covers at most {MAX_RANGE_DAYS} days."})
        return super().qs

    def filter_seen_since(self, qs: JobQuerySet, name: str, value: datetime) -> JobQuerySet:
        return qs.seen_since(value)

    def filter_flagged(self, qs: QuerySet[Job], name: str, value: bool | None) -> QuerySet[Job]:
        if value is None:
            return qs
        return qs.exclude(flags=[]) if value else qs.filter(flags=[])

    def filter_flag(self, qs: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        return qs.filter(flags__contains=[value]) if value else qs
