"""apps.core.web.query: the pages' parameters. An absent or empty optional parameter is None, a present one is read
strictly (a QueryError naming it), a required one absent is an error as a wrong one is; several values of one
parameter: the last, as Django reads it. A page's filterset with an invalid value is a QueryError, and a page
decorated with bad_query_is_400 answers one with its 400 page saying what was wrong."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse, QueryDict
from django.test import RequestFactory

from apps.core.web.query import (
    QueryError,
    amount_param,
    bad_query_is_400,
    currency_param,
    date_param,
    filters_checked,
    id_param,
    text_param,
)
from apps.jobs.filtersets import JobFilterSet
from apps.jobs.models import Job


def test_absent_or_empty_optional_parameters_are_none() -> None:
    empty = QueryDict("job=&day=")
    assert id_param(empty, "job") is None and id_param(empty, "other") is None
    assert date_param(empty, "day") is None and date_param({}, "day") is None
    assert text_param(empty, "q") == ""


def test_present_parameters_are_read_strictly() -> None:
    values = QueryDict("job=42&day=2026-11-02&price=0.50&currency=EUR&q=gpu%20a")
    assert id_param(values, "job") == 42
    assert date_param(values, "day") == date(2026, 11, 2)
    assert amount_param(values, "price") == Decimal("0.50")
    assert currency_param(values, "currency") == "EUR"
    assert text_param(values, "q") == "gpu a"


def test_the_last_of_several_values_is_read() -> None:
    assert id_param(QueryDict("job=1&job=2"), "job") == 2


def test_a_value_that_is_not_a_string_reads_as_absent() -> None:
    # a form's cleaned data can hold other types; only text is parsed
    assert id_param({"job": 7}, "job") is None


@pytest.mark.parametrize(
    ("read", "raw"),
    [
        (lambda v: id_param(v, "p"), "0"),
        (lambda v: id_param(v, "p"), "-1"),
        (lambda v: id_param(v, "p"), "9" * 20),
        (lambda v: date_param(v, "p"), "02/11/2026"),
        (lambda v: amount_param(v, "p"), "-1"),
        (lambda v: amount_param(v, "p"), "1e3"),
        (lambda v: amount_param(v, "p"), ""),  # required: absent is wrong too
        (lambda v: currency_param(v, "p"), "eur"),
        (lambda v: currency_param(v, "p"), ""),
        (lambda v: text_param(v, "p"), "tab\there"),
    ],
)
def test_a_wrong_value_is_a_query_error_naming_its_parameter(read, raw: str) -> None:
    with pytest.raises(QueryError) as refused:
        read({"p": raw})
    assert refused.value.name == "p" and str(refused.value).startswith("p: ")


def test_text_takes_its_length_and_line_breaks_from_its_caller() -> None:
    assert text_param({"r": "a\nb"}, "r", lines=True) == "a\nb"
    with pytest.raises(QueryError, match="at most 3 characters"):
        text_param({"r": "abcd"}, "r", max_length=3)


@pytest.mark.django_db
def test_a_filterset_with_an_invalid_value_is_a_query_error_naming_each_filter() -> None:
    filterset = JobFilterSet(QueryDict("start=yesterday&state=nonsense"), queryset=Job.objects.all())
    with pytest.raises(QueryError) as refused:
        filters_checked(filterset)
    assert "start:" in str(refused.value) and "state:" in str(refused.value)
    filters_checked(JobFilterSet(QueryDict("state=failed"), queryset=Job.objects.all()))  # a valid one passes


def _page(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"job {id_param(request.GET, 'job')}")


def test_a_page_answers_a_query_error_with_its_400_page() -> None:
    page = bad_query_is_400(_page)
    request = RequestFactory().get("/jobs/", {"job": "x1"})
    request.user = AnonymousUser()
    response = page(request)
    assert response.status_code == 400
    assert "job: a whole number from 1 to" in response.content.decode()
    good = RequestFactory().get("/jobs/", {"job": "3"})
    assert page(good).content == b"job 3"
    assert page.__name__ == "_page"  # wraps keeps the view's name (URL names, the profiler)
