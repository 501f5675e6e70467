"""Pages of the API's lists: `?page_size=` from 1 to FLEETWATT_API_MAX_PAGE_SIZE, a clear 400 beyond.

Every list pages by a cursor (`next`, `previous`; no `count`): one style for finance tools, no COUNT per
page, and a page costs the same however deep it is. A cursor's first ordering field should be unique (or
nearly): DRF's cursor finds its place by that field and skips ties by an offset (at most 1,000).

A cursor is a parameter like any other: one that is not base64 of what a page wrote, or whose position is not a
value of the list's first ordering field (`p=garbage`, a NUL byte, a day out of range), is a 400 naming `cursor`
(apps.core.web.params reads the position as each list declares), never a query that fails in the database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination
from rest_framework.request import Request

from . import params


class _CappedPageSize:
    page_size: int | None
    page_size_query_param = "page_size"
    page_size_query_description = "Rows per page, 1 to FLEETWATT_API_MAX_PAGE_SIZE (1,000 by default); more: 400."

    @property
    def max_page_size(self) -> int:
        return settings.FLEETWATT_API_MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> int | None:
        asked = request.query_params.get(self.page_size_query_param)
        if asked is None:
            return self.page_size
        try:
            return params.whole_number(asked, name="page_size", low=1, high=self.max_page_size)
        except params.QueryError:
            raise ValidationError({"page_size": f"A whole number from 1 to {self.max_page_size}."}) from None


# DRF declares max_page_size and page_size_query_param optional and settable; here one is read from the
# settings on each request (a property) and the other always set, which mypy calls incompatible.
class CappedPageNumberPagination(_CappedPageSize, PageNumberPagination):  # type: ignore[misc]
    pass


INVALID_CURSOR = "Not a cursor of this list: follow a page's `next` or `previous` link."


def _on_text(raw: str) -> Any:
    return params.stored_text(raw, name="cursor")


def _on_moment(raw: str) -> Any:
    return params.position_moment(raw, name="cursor")


def _on_day(raw: str) -> Any:
    return params.position_day(raw, name="cursor")


class _CheckedCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """A cursor whose position `read_position` reads (the type of the list's first ordering field)."""

    read_position: Callable[[str], Any] = staticmethod(_on_text)

    def decode_cursor(self, request: Request) -> Cursor | None:
        encoded = request.query_params.get(self.cursor_query_param)
        try:
            if encoded is not None:
                params.cursor(encoded, name="cursor")
            cursor = super().decode_cursor(request)  # (DRF's own "Invalid cursor" is a 404: NotFound)
            if cursor is not None and cursor.position is not None:
                type(self).read_position(str(cursor.position))  # (text, as decoded; the stubs say int)
        except (params.QueryError, NotFound):
            raise ValidationError({"cursor": INVALID_CURSOR}) from None
        return cursor


class JobCursorPagination(_CheckedCursorPagination):
    """Jobs page by a cursor on their start: no COUNT over a team's (possibly) million jobs, and a page
    costs the same however deep it is."""

    ordering = ("-start", "-id")
    read_position = staticmethod(_on_moment)


class FlagCursorPagination(_CheckedCursorPagination):
    """Findings page by a cursor on their creation, newest first: a team's page walks the index of all
    findings in that order and stops at the page's end, where a COUNT would join every one to its job."""

    ordering = ("-created_at", "-id")
    read_position = staticmethod(_on_moment)


class NameCursorPagination(_CheckedCursorPagination):
    """Objects with a unique name (teams, clusters, job groups), by name."""

    ordering = ("name",)


class GpuCursorPagination(_CheckedCursorPagination):
    """GPUs by cluster, node and index: the queryset annotates `position`, a unique text of the three (the
    cursor finds its place by one field)."""

    ordering = ("position",)


class HourCursorPagination(_CheckedCursorPagination):
    """One GPU's hours, oldest first (an hour is unique per GPU)."""

    ordering = ("hour",)
    read_position = staticmethod(_on_moment)


class ReportCursorPagination(_CheckedCursorPagination):
    """Weekly reports, newest week first (ties within a week: one per team, skipped by offset)."""

    ordering = ("-week_start", "team__name", "id")
    read_position = staticmethod(_on_day)


class AuditCursorPagination(_CheckedCursorPagination):
    """The audit log, newest first."""

    ordering = ("-at", "-id")
    read_position = staticmethod(_on_moment)
