"""apps.core.web.filtersets: the same filtering and the same errors as django-filter's own FilterSet, for less."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.http import QueryDict
from django_filters.filterset import BaseFilterSet

from apps.fleet.models import Team
from apps.jobs.filtersets import JobFilterSet
from apps.jobs.models import Job
from apps.waste.filtersets import FlagFilterSet
from apps.waste.models import Flag

pytestmark = pytest.mark.django_db

ASKED = [
    "",
    "team=vision&start=2026-11-01T00:00:00Z&end=2026-11-02T00:00:00Z",
    "flag=memory_hog&flagged=true&user=ada",
    "flagged=false&state=failed",
    "state=nonsense",
    "team=nobody",
    "start=yesterday",
    "start=2026-01-01T00:00:00Z&end=2027-06-01T00:00:00Z",  # past the longest range: raised by qs
]
FLAGS_ASKED = ["", "kind=memory_hog&status=open&team=vision", "older_than_days=3", "older_than_days=-1", "team=x"]


def _library_made(filterset_class: type, data: QueryDict, queryset: Any) -> Any:
    """The FilterSet as django-filter itself makes it: its filters deep-copied, a form class per instance."""
    filterset = filterset_class.__new__(filterset_class)
    BaseFilterSet.__init__(filterset, data, queryset)
    filterset.get_form_class = lambda: BaseFilterSet.get_form_class(filterset)
    return filterset


def _outcome(filterset: Any) -> tuple[bool, Any, str]:
    valid = filterset.is_valid()
    try:
        sql = str(filterset.qs.query) if valid else ""
    except Exception as exc:  # the range check raises from qs
        sql = repr(exc)
    # `older_than_days` counts from now: the two instances' nows differ by microseconds
    return valid, filterset.errors.get_json_data(), re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+", "<now>", sql)


@pytest.mark.parametrize(
    ("filterset_class", "queryset", "asked"),
    [(JobFilterSet, lambda: Job.objects.all(), q) for q in ASKED]
    + [(FlagFilterSet, lambda: Flag.objects.all(), q) for q in FLAGS_ASKED],
)
def test_the_same_queries_and_errors_as_django_filter(filterset_class, queryset, asked) -> None:
    Team.objects.create(name="vision")
    data = QueryDict(asked)
    ours = _outcome(filterset_class(data, queryset()))
    theirs = _outcome(_library_made(filterset_class, data, queryset()))
    assert ours == theirs
    assert _outcome(filterset_class(data, queryset())) == ours  # and again, with the form class kept


def test_each_instance_has_its_own_filters_bound_to_it() -> None:
    first = JobFilterSet(QueryDict("start=2026-11-01T00:00:00Z"), Job.objects.all())
    second = JobFilterSet(QueryDict("start=2026-11-05T00:00:00Z"), Job.objects.all())
    assert first.is_valid() and second.is_valid()
    assert first.filters["start"] is not second.filters["start"]
    assert first.filters["start"].parent is first and second.filters["start"].parent is second
    assert first.filters["start"].filter.f is first.filters["start"]  # its method, called on this instance
    assert "parent" not in vars(JobFilterSet.base_filters["start"])  # the class's own filters untouched
    assert str(first.qs.query) != str(second.qs.query)
