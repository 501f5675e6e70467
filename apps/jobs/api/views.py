from __future__ import annotations

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.page_cache import CachedListMixin
from apps.core.pagination import JobCursorPagination
from apps.core.query_params import StrictQueryParamsMixin
from apps.core.renderers import csv_stream
from apps.jobs.filtersets import JobFilterSet
from apps.jobs.methods import METHODS
from apps.jobs.models import Job
from apps.jobs.services import job_work_record

from .serializers import JobDetailSerializer, JobSerializer, WorkSerializer


class JobViewSet(CachedListMixin, StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """Jobs with their GPU energy, split method and coverage. Members see their teams' jobs."""

    filterset_class = JobFilterSet
    pagination_class = JobCursorPagination

    def get_queryset(self) -> QuerySet[Job]:
        jobs = Job.objects.visible_to(self.request.user).order_by("-start", "id")
        if self.action == "list":
            # The page's columns as rows, no model instance (three per job with its cluster, team and group).
            return jobs.values(*JobSerializer.row_keys())
        return jobs.select_related("cluster", "team", "job_group")

    def get_serializer_class(self) -> type[JobSerializer]:
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    @extend_schema(request=WorkSerializer, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def work(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """The job reports its work (e.g. 1,000 tokens, requests) so SCI is per unit of work, not per run.
        Its team's members (and leads) and admins may report it; finance and API tokens only read (403, the
        default permissions), and another team's job is not found (404)."""
        job = self.get_object()  # 404 for another team's job
        body = WorkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job_work_record(
            job=job, work_units=body.validated_data["work_units"], work_unit=body.validated_data["work_unit"]
        )
        return Response(JobSerializer(job).data)

    # DRF sends whatever response a handler returns; the stubs narrow list() to Response.
    def list(  # type: ignore[override]
        self, request: Request, *args: object, **kwargs: object
    ) -> Response | StreamingHttpResponse:
        """`?format=csv` without `page_size` or `cursor`: every matching job, streamed (finance exports of
        long ranges)."""
        paged = "cursor" in request.query_params or "page_size" in request.query_params
        if request.accepted_renderer.format != "csv" or paged:
            return super().list(request, *args, **kwargs)
        jobs = self.filter_queryset(self.get_queryset())
        columns = [f for f in JobSerializer.Meta.fields if f != "attribution_j"] + [
            f"attribution_j.{m}" for m in METHODS
        ]
        rows = (JobSerializer(job).data for job in jobs.iterator(chunk_size=1000))
        response = StreamingHttpResponse(csv_stream(rows, columns), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="fleetwatt-jobs.csv"'
        return response
