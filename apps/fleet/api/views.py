from __future__ import annotations

import django_filters
from django.db.models import CharField, F, QuerySet, Value
from django.db.models.functions import Cast, Concat, LPad
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets

from apps.carbon.models import JobGroup
from apps.core.access.authentication import FLEET_WIDE
from apps.core.page_cache import CachedListMixin
from apps.core.web.fields import MomentField
from apps.core.web.filtersets import FilterSet, TextFilter
from apps.core.web.pagination import GpuCursorPagination, NameCursorPagination
from apps.core.web.params import ID_PATTERN
from apps.fleet.models import Cluster, Gpu, Team
from apps.rollups.gpu_selectors import gpus_with_sums

from .serializers import ClusterSerializer, GpuSerializer, JobGroupSerializer, TeamSerializer


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


@extend_schema_view(list=extend_schema(parameters=[GpuPeriodSerializer]))
class GpuViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """GPUs with their hours, energy, idle energy and utilisation over `?start=&end=` (ISO 8601): the whole
    fleet's, so admins and finance only."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    permission_classes = FLEET_WIDE
    serializer_class = GpuSerializer
    filterset_class = GpuFilterSet
    pagination_class = GpuCursorPagination

    def get_queryset(self) -> QuerySet[Gpu]:
        window = GpuPeriodSerializer(data=self.request.query_params)
        window.is_valid(raise_exception=True)
        # Each GPU's sums from its days, and its rows of a day the period cuts (apps.rollups.gpu_selectors).
        gpus = (
            gpus_with_sums(start=window.validated_data.get("start"), end=window.validated_data.get("end"))
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


class TeamViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Teams the user may see (their rollups: apps.rollups.api)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = TeamSerializer
    pagination_class = NameCursorPagination

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.visible_to(self.request.user).order_by("name")


class ClusterViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Clusters (admins and finance; their rollups: apps.rollups.api)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = ClusterSerializer
    pagination_class = NameCursorPagination
    permission_classes = FLEET_WIDE
    queryset = Cluster.objects.select_related("site").order_by("name")


class JobGroupViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Job groups: campaigns, models (finance, admins; their rollups: apps.rollups.api)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    serializer_class = JobGroupSerializer
    pagination_class = NameCursorPagination
    permission_classes = FLEET_WIDE
    queryset = JobGroup.objects.order_by("name")
