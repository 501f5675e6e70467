"""Pages of the API's lists: `?page_size=` from 1 to FLEETWATT_API_MAX_PAGE_SIZE, a clear 400 beyond.

Every list pages by a cursor (`next`, `previous`; no `count`): one style for finance tools, no COUNT per
page, and a page costs the same however deep it is. A cursor's first ordering field should be unique (or
nearly): DRF's cursor finds its place by that field and skips ties by an offset (at most 1,000)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request

from .query import QueryError, whole_number


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
            return whole_number(asked, name="page_size", low=1, high=self.max_page_size)
        except QueryError:
            raise ValidationError({"page_size": f"A whole number from 1 to {self.max_page_size}."}) from None


# DRF declares max_page_size and page_size_query_param optional and settable; here one is read from the
# settings on each request (a property) and the other always set, which mypy calls incompatible.
class CappedPageNumberPagination(_CappedPageSize, PageNumberPagination):  # type: ignore[misc]
    pass


class JobCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """Jobs page by a cursor on their start: no COUNT over a team's (possibly) million jobs, and a page
    costs the same however deep it is."""

    ordering = ("-start", "-id")


class FlagCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """Findings page by a cursor on their creation, newest first: a team's page walks the index of all
    findings in that order and stops at the page's end, where a COUNT would join every one to its job."""

    ordering = ("-created_at", "-id")


class NameCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """Objects with a unique name (teams, clusters, job groups), by name."""

    ordering = ("name",)


class GpuCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """GPUs by cluster, node and index: the queryset annotates `position`, a unique text of the three (the
    cursor finds its place by one field)."""

    ordering = ("position",)


class ReportCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """Weekly reports, newest week first (ties within a week: one per team, skipped by offset)."""

    ordering = ("-week_start", "team__name", "id")


class AuditCursorPagination(_CappedPageSize, CursorPagination):  # type: ignore[misc]  # as above
    """The audit log, newest first."""

    ordering = ("-at", "-id")
