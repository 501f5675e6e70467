"""The jobs' filters (apps/jobs/filtersets.py), shared by the API and the pages: a period is the jobs still running
in it, a range is at most MAX_RANGE_DAYS, the flag filters read each job's list of flag kinds. Through the API:
tests/api/test_jobs_api.py; the shared filterset machinery: tests/core/web/test_filtersets.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.exceptions import ValidationError

from apps.jobs.filtersets import MAX_RANGE_DAYS, JobFilterSet
from apps.jobs.models import Job
from tests.factories import HOUR, T0, ClusterFactory, JobFactory

pytestmark = pytest.mark.django_db


def _keys(**data: str) -> list[str]:
    return sorted(JobFilterSet(data, queryset=Job.objects.all()).qs.values_list("job_key", flat=True))


def test_a_period_holds_the_jobs_running_in_it() -> None:
    # given a job that ended before the period, one running across its start, one with no last-seen time, one after
    JobFactory(job_key="before", start=T0 - 5 * HOUR, last_seen=T0 - 4 * HOUR)
    JobFactory(job_key="across", start=T0 - 2 * HOUR, last_seen=T0 + HOUR)
    JobFactory(job_key="unseen", start=T0 - 2 * HOUR, last_seen=None)
    JobFactory(job_key="after", start=T0 + 3 * HOUR, last_seen=T0 + 4 * HOUR)
    # when
    keys = _keys(start=T0.isoformat(), end=(T0 + 2 * HOUR).isoformat())
    # then
    assert keys == ["across", "unseen"]


def test_a_range_longer_than_the_limit_is_refused() -> None:
    JobFactory()
    end = T0 + timedelta(days=MAX_RANGE_DAYS, seconds=1)
    with pytest.raises(ValidationError) as caught:
        _keys(start=T0.isoformat(), end=end.isoformat())
    assert "at most 400 days" in str(caught.value.detail["end"])
    assert len(_keys(start=T0.isoformat(), end=(T0 + timedelta(days=MAX_RANGE_DAYS)).isoformat())) == 1


def test_flagged_and_a_flags_kind() -> None:
    JobFactory(job_key="clean", flags=[])
    JobFactory(job_key="hog", flags=["memory_hog"])
    JobFactory(job_key="both", flags=["memory_hog", "low_coverage"])
    assert _keys(flagged="true") == ["both", "hog"]
    assert _keys(flagged="false") == ["clean"]
    assert _keys(flag="low_coverage") == ["both"]
    assert _keys(flag="") == ["both", "clean", "hog"]


def test_cluster_and_team_by_name_and_exact_fields() -> None:
    a = ClusterFactory(name="alpha")
    JobFactory(job_key="a1", cluster=a, user="ada", partition="gpu", state="failed")
    JobFactory(job_key="b1", user="ada-lovelace", partition="gpu", state="completed")
    assert _keys(cluster="alpha") == ["a1"]
    assert _keys(user="ada") == ["a1"]  # exact, not a prefix
    assert _keys(partition="gpu", state="completed") == ["b1"]
    team = Job.objects.get(job_key="b1").team.name
    assert _keys(team=team) == ["b1"]


def test_an_unknown_cluster_or_state_is_a_form_error_not_every_job() -> None:
    JobFactory()
    filters = JobFilterSet({"cluster": "nope", "state": "exploded"}, queryset=Job.objects.all())
    assert not filters.is_valid()
    assert set(filters.errors) == {"cluster", "state"}


def test_the_queryset_is_read_without_validating_first() -> None:
    # django-filter's `qs` validates the form itself; the range check must not need a caller to have done it
    JobFactory(job_key="one")
    assert list(JobFilterSet({}, queryset=Job.objects.all()).qs.values_list("job_key", flat=True)) == ["one"]
    assert JobFilterSet(None, queryset=Job.objects.all()).qs.count() == 1  # unbound: every job
