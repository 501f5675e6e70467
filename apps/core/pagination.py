from django.conf import settings
from rest_framework.pagination import PageNumberPagination


class CappedPageNumberPagination(PageNumberPagination):
    """`?page_size=` up to FLEETWATT_API_MAX_PAGE_SIZE."""

    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # type: ignore[override]
        return settings.FLEETWATT_API_MAX_PAGE_SIZE
