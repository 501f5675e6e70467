from __future__ import annotations

from datetime import datetime
from typing import Any

import django_filters
from django.db.models import CharField, F, QuerySet, Value
from django.db.models.functions import Cast, Concat, LPad
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.carbon.models import JobGroup
from apps.core.access.authentication import FLEET_WIDE
from apps.core.page_cache import CachedListMixin, cached_page
from apps.core.web.fields import MomentField
from apps.core.web.filtersets import FilterSet, TextFilter
from apps.core.web.pagination import GpuCursorPagination, HourCursorPagination, NameCursorPagination
from apps.core.web.params import ID_PATTERN
from apps.core.web.query_params import StrictQueryParamsMixin
from apps.fleet.models import Cluster, Gpu, Team
from apps.rollups.gpu_selectors import gpus_with_sums
from apps.telemetry.models import GpuHour
from apps.telemetry.selectors import gpu_settings_over

from .serializers import (
    ClusterSerializer,
    GpuDetailSerializer,
    GpuHourSerializer,
    GpuSerializer,
    JobGroupSerializer,
    TeamSerializer,
)


class GpuFilterSet(FilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="node__cluster", queryset=Cluster.objects.all(), to_field_name="name"
    )
    hostname = TextFilter(field_name="node__hostname")
    model_name = TextFilter()

    class Meta:
        model = Gpu
        fields = ["cluster", "hostname", "model_name"]


class GpuPeriodSerializer(serializers.Serializer):
    start = MomentField(required=False, help_text="Hours from (ISO 8601).")
    end = MomentField(required=False, help_text="Hours before (ISO 8601).")


@extend_schema_view(
    list=extend_schema(parameters=[GpuPeriodSerializer]),
    retrieve=extend_schema(parameters=[GpuPeriodSerializer], responses=GpuDetailSerializer),
)
class GpuViewSet(CachedListMixin, StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """GPUs with their hours, energy, idle energy and utilisation over `?start=&end=` (ISO 8601): the whole
    fleet's, so admins and finance only. A GPU's own answer adds its power limit and SM clock over the period, and
    `/api/gpus/{id}/hours/` gives its GPU-hours one by one."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    permission_classes = FLEET_WIDE
    serializer_class = GpuSerializer
    filterset_class = GpuFilterSet
    pagination_class = GpuCursorPagination
    extra_query_params = frozenset({"start", "end"})  # the period: GpuPeriodSerializer
    strict_actions = frozenset({"list", "hours"})

    def _window(self) -> tuple[datetime | None, datetime | None]:
        window = GpuPeriodSerializer(data=self.request.query_params)
        window.is_valid(raise_exception=True)
        return window.validated_data.get("start"), window.validated_data.get("end")

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        return {"retrieve": GpuDetailSerializer, "hours": GpuHourSerializer}.get(self.action, GpuSerializer)

    def get_queryset(self) -> QuerySet[Gpu]:
        start, end = self._window()
        # Each GPU's sums from its days, and its rows of a day the period cuts (apps.rollups.gpu_selectors).
        gpus = (
            gpus_with_sums(start=start, end=end)
            .select_related("node__cluster")
            .annotate(  # the cursor's place: cluster, node and index in one unique, sortable text
                position=Concat(
                    F("node__cluster__name"),
                    Value("/"),
                    F("node__hostname"),
                    Value("/"),
                    LPad(Cast("index", CharField()), 4, Value("0")),
                    output_field=CharField(),
                )
            )
            .order_by("position")
        )
        if self.action == "list":
            # The page's columns as rows, no model instance (a GPU, its node and cluster, per row of the page).
            return gpus.values(*GpuSerializer.row_keys(), "position")
        return gpus

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A GPU's sums over `?start=&end=`, and its power limit and SM clock over the same GPU-hours."""
        gpu = self.get_object()
        start, end = self._window()
        gpu.period_settings = gpu_settings_over(gpu_id=gpu.pk, start=start, end=end)
        return Response(self.get_serializer(gpu).data)

    @extend_schema(parameters=[GpuPeriodSerializer], responses=GpuHourSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=HourCursorPagination, filterset_class=None)
    @cached_page
    def hours(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """The GPU's hours in `?start=&end=` (either open), oldest first: each GPU-hour's energy (device, jobs,
        idle, unobserved), occupancy, source and agent, and its power limit (mean, least, most) and mean SM
        clock (null where nobody exported them). `?format=csv`: one row per hour."""
        start, end = self._window()
        gpu = get_object_or_404(Gpu, pk=pk)
        rows = GpuHour.objects.filter(gpu=gpu)
        if start is not None:
            rows = rows.filter(hour__gte=start)
        if end is not None:
            rows = rows.filter(hour__lt=end)
        page = self.paginate_queryset(rows.order_by("hour"))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class TeamViewSet(CachedListMixin, StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """Teams the user may see (their rollups: apps.rollups.api)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = TeamSerializer
    pagination_class = NameCursorPagination

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.visible_to(self.request.user).order_by("name")


class ClusterViewSet(CachedListMixin, StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """Clusters (admins and finance; their rollups: apps.rollups.api)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = ClusterSerializer
    pagination_class = NameCursorPagination
    permission_classes = FLEET_WIDE
    queryset = Cluster.objects.select_related("site").order_by("name")


class JobGroupViewSet(CachedListMixin, StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """Job groups: campaigns, models (finance, admins; their rollups: apps.rollups.api)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = JobGroupSerializer
    pagination_class = NameCursorPagination
    permission_classes = FLEET_WIDE
    queryset = JobGroup.objects.order_by("name")
