from django.conf import settings
from rest_framework.pagination import CursorPagination, PageNumberPagination


class CappedPageNumberPagination(PageNumberPagination):
    """`?page_size=` up to FLEETWATT_API_MAX_PAGE_SIZE."""

    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # type: ignore[override]
        return settings.FLEETWATT_API_MAX_PAGE_SIZE


class JobCursorPagination(CursorPagination):
    """Jobs page by a cursor on their start: no COUNT over a team's (possibly) million jobs, and a page
    costs the same however deep it is. `?page_size=` up to FLEETWATT_API_MAX_PAGE_SIZE."""

    ordering = ("-start", "-id")
    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # type: ignore[override]
        return settings.FLEETWATT_API_MAX_PAGE_SIZE


class FlagCursorPagination(CursorPagination):
    """Findings page by a cursor on their creation, newest first: a team's page walks the index of all
    findings in that order and stops at the page's end, where a COUNT would join every one to its job."""

    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # type: ignore[override]
        return settings.FLEETWATT_API_MAX_PAGE_SIZE
