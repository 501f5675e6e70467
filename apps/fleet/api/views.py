from __future__ import annotations

import django_filters
from django.db.models import Count, F, FloatField, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from rest_framework import viewsets

from apps.fleet.models import Cluster, Gpu

from .serializers import GpuSerializer


class GpuFilterSet(django_filters.FilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="node__cluster", queryset=Cluster.objects.all(), to_field_name="name"
    )
    hostname = django_filters.CharFilter(field_name="node__hostname")

    class Meta:
        model = Gpu
        fields = ["cluster", "hostname", "model_name"]


class GpuViewSet(viewsets.ReadOnlyModelViewSet):
    """GPUs with their hours, energy, idle energy and utilisation over `?start=&end=` (ISO 8601)."""

    serializer_class = GpuSerializer
    filterset_class = GpuFilterSet

    def get_queryset(self) -> QuerySet[Gpu]:
        period = Q()
        start, end = self.request.query_params.get("start"), self.request.query_params.get("end")
        if start:
            period &= Q(hours__hour__gte=start)
        if end:
            period &= Q(hours__hour__lt=end)
        zero = Value(0.0, output_field=FloatField())
        return (
            Gpu.objects.select_related("node__cluster")
            .annotate(
                hours_count=Count("hours", filter=period),
                energy_j=Coalesce(Sum("hours__device_energy_j", filter=period), zero),
                jobs_energy_j=Coalesce(Sum("hours__jobs_energy_j", filter=period), zero),
                idle_energy_j=Coalesce(Sum("hours__idle_energy_j", filter=period), zero),
                occupied_s=Coalesce(Sum("hours__occupied_s", filter=period), zero),
            )
            .order_by(F("node__cluster__name"), "node__hostname", "index")
        )
