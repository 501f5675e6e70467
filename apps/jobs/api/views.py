from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets

from apps.jobs.filtersets import JobFilterSet
from apps.jobs.models import Job

from .serializers import JobDetailSerializer, JobSerializer


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    """Jobs with their GPU energy, split method and coverage. Members see their teams' jobs."""

    filterset_class = JobFilterSet

    def get_queryset(self) -> QuerySet[Job]:
        return (
            Job.objects.visible_to(self.request.user)
            .select_related("cluster", "team", "job_group")
            .order_by("-start", "id")
        )

    def get_serializer_class(self) -> type[JobSerializer]:
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer
