"""apps.core.web.pagination: `?page_size=` from 1 to FLEETWATT_API_MAX_PAGE_SIZE (read on each request), a clear 400
beyond; a cursor is a parameter like any other: one no page wrote, or whose position is not a value of the list's
first ordering field, is a 400 naming `cursor`, never a 404 nor a query that fails in Postgres. Following `next`
from the first page visits every row once, in order. Through the API: tests/api/test_cursor_pages.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import Cursor
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from apps.core.web.pagination import (
    INVALID_CURSOR,
    AuditCursorPagination,
    CappedPageNumberPagination,
    JobCursorPagination,
    NameCursorPagination,
    ReportCursorPagination,
)
from apps.fleet.models import Team


def _request(**query: Any) -> Request:
    return Request(APIRequestFactory().get("/api/things/", query))


def _cursor_of(pagination: Any, position: Any, offset: int = 0) -> str:
    """The cursor a page's link would hold for this position."""
    pagination.base_url = "http://testserver/api/things/"
    url = pagination.encode_cursor(Cursor(offset=offset, reverse=False, position=position))
    return parse_qs(urlsplit(url).query)["cursor"][0]


@pytest.mark.parametrize("asked", ["1", "500", "1000"])
def test_a_page_size_within_the_cap_is_taken(asked: str) -> None:
    assert CappedPageNumberPagination().get_page_size(_request(page_size=asked)) == int(asked)


def test_no_page_size_asked_is_the_lists_own() -> None:
    assert CappedPageNumberPagination().get_page_size(_request()) == 100  # REST_FRAMEWORK's PAGE_SIZE
    assert JobCursorPagination().get_page_size(_request()) == JobCursorPagination.page_size


@pytest.mark.parametrize("asked", ["0", "1001", "-5", "ten", "1e3", "\uff11\uff10", "", "5 "])
def test_a_page_size_past_the_cap_or_not_a_number_is_a_400_naming_it(asked: str) -> None:
    with pytest.raises(ValidationError) as refused:
        JobCursorPagination().get_page_size(_request(page_size=asked))
    assert refused.value.detail == {"page_size": "A whole number from 1 to 1000."}


def test_the_cap_is_the_settings_read_on_each_request(settings) -> None:
    pagination = CappedPageNumberPagination()
    settings.FLEETWATT_API_MAX_PAGE_SIZE = 50
    with pytest.raises(ValidationError, match="from 1 to 50"):
        pagination.get_page_size(_request(page_size="51"))
    settings.FLEETWATT_API_MAX_PAGE_SIZE = 5000
    assert pagination.get_page_size(_request(page_size="5000")) == 5000


@pytest.mark.parametrize(
    "cursor",
    ["garbage!", "p=garbage", "cD0yMDI2", "\x00", "A" * 4001, "cj0xJnA9eA=="],  # the last: base64 of "r=1&p=x"
)
def test_a_cursor_no_page_wrote_is_a_400_naming_cursor(cursor: str) -> None:
    with pytest.raises(ValidationError) as refused:
        JobCursorPagination().decode_cursor(_request(cursor=cursor))
    assert refused.value.detail == {"cursor": INVALID_CURSOR}


@pytest.mark.parametrize(
    ("pagination", "bad_position"),
    [
        (JobCursorPagination, "yesterday"),  # a time list: its position must be a time
        (AuditCursorPagination, "10000-01-01 00:00:00+00:00"),  # past what Postgres and Python hold
        (ReportCursorPagination, "2026-02-30"),  # a day list: a day
        (NameCursorPagination, "vis\x00ion"),  # a name list: text Postgres can hold
    ],
)
def test_a_cursor_whose_position_the_list_cannot_hold_is_a_400(pagination: type, bad_position: str) -> None:
    cursor = _cursor_of(pagination(), bad_position)
    with pytest.raises(ValidationError) as refused:
        pagination().decode_cursor(_request(cursor=cursor))
    assert refused.value.detail == {"cursor": INVALID_CURSOR}


@pytest.mark.parametrize(
    ("pagination", "position"),
    [
        (JobCursorPagination, "2026-11-02 10:00:00+00:00"),
        (ReportCursorPagination, "2026-11-02"),
        (NameCursorPagination, "vision"),
    ],
)
def test_a_cursor_a_page_wrote_is_read_back(pagination: type, position: str) -> None:
    cursor = pagination().decode_cursor(_request(cursor=_cursor_of(pagination(), position, offset=2)))
    assert cursor == Cursor(offset=2, reverse=False, position=position)
    assert pagination().decode_cursor(_request()) is None  # the first page has none


@pytest.mark.django_db
def test_following_next_visits_every_row_once_in_order() -> None:
    # given teams whose names sort in a known order
    names = sorted(f"team-{i:02d}" for i in range(23))
    Team.objects.bulk_create([Team(name=n) for n in reversed(names)])
    seen: list[str] = []
    query: dict[str, str] = {"page_size": "5"}
    # when every page is read by following its next link
    for _ in range(10):
        pagination = NameCursorPagination()
        page = pagination.paginate_queryset(Team.objects.all(), _request(**query))
        seen += [t.name for t in page]
        next_link = pagination.get_next_link()
        if next_link is None:
            break
        query = {k: v[0] for k, v in parse_qs(urlsplit(next_link).query).items()}
    # then each team came once, in the list's order
    assert seen == names
