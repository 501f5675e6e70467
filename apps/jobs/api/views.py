from __future__ import annotations

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.renderers import csv_stream
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

    def list(self, request: Request, *args: object, **kwargs: object) -> Response | StreamingHttpResponse:
        """`?format=csv` without `page`: every matching job, streamed (finance exports of long ranges)."""
        if request.accepted_renderer.format != "csv" or "page" in request.query_params:
            return super().list(request, *args, **kwargs)
        jobs = self.filter_queryset(self.get_queryset())
        columns = [f for f in JobSerializer.Meta.fields if f != "attribution_j"] + [
            f"attribution_j.{m}" for m in ("whole_gpu", "sm_time", "busy_time", "memory", "equal")
        ]
        rows = (JobSerializer(job).data for job in jobs.iterator(chunk_size=1000))
        response = StreamingHttpResponse(csv_stream(rows, columns), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="fleetwatt-jobs.csv"'
        return response
