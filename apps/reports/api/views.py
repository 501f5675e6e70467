from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets
from rest_framework.serializers import BaseSerializer

from apps.core.page_cache import CachedListMixin
from apps.core.web.pagination import ReportCursorPagination
from apps.core.web.params import ID_PATTERN
from apps.reports.filtersets import WeeklyReportFilterSet
from apps.reports.models import WeeklyReport

from .serializers import WeeklyReportDetailSerializer, WeeklyReportSerializer


class WeeklyReportViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Weekly reports, newest first: a member sees the reports of the teams they belong to, finance and
    admins every team's, admins also the fleet summaries. The detail has the numbers, text and HTML."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    filterset_class = WeeklyReportFilterSet
    pagination_class = ReportCursorPagination

    def get_queryset(self) -> QuerySet[WeeklyReport]:
        reports = WeeklyReport.objects.visible_to(self.request.user).select_related("team")
        if self.action == "list":
            reports = reports.defer("html", "text", "data")
        return reports.order_by("-week_start", "team__name", "id")

    def get_serializer_class(self) -> type[BaseSerializer]:
        return WeeklyReportDetailSerializer if self.action == "retrieve" else WeeklyReportSerializer
