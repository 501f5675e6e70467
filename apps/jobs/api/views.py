from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.page_cache import CachedListMixin
from apps.core.units.footprint import Footprint
from apps.core.web.filtersets import MomentFormField
from apps.core.web.pagination import JobCursorPagination
from apps.core.web.params import ID_PATTERN
from apps.core.web.query_params import StrictQueryParamsMixin
from apps.core.web.renderers import csv_stream
from apps.jobs.filtersets import JobFilterSet
from apps.jobs.methods import METHODS
from apps.jobs.models import Job
from apps.jobs.selectors import jobs_in_period_footprints
from apps.jobs.services import job_work_record

from .serializers import JobDetailSerializer, JobSerializer, WorkSerializer


class JobViewSet(CachedListMixin, StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """Jobs with their GPU energy, split method and coverage. Members see their teams' jobs."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
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

    def _period(self) -> tuple[datetime | None, datetime | None] | None:
        """The period the list was asked for (`?start=`, `?end=`, checked by the filterset before this is read),
        or None: the in-period figures are computed only where one is asked for."""
        start, end = (self.request.query_params.get(k) for k in ("start", "end"))
        if not start and not end:
            return None
        field = MomentFormField(required=False)
        return field.clean(start or None), field.clean(end or None)

    def _in_period(self, rows: list[Any]) -> dict[int, Footprint] | None:
        period = self._period()
        if period is None:
            return None
        return jobs_in_period_footprints(job_ids=[r["id"] for r in rows], start=period[0], end=period[1])

    def paginate_queryset(self, queryset: QuerySet[Job]) -> list | None:  # type: ignore[override]
        """The page, and its jobs' parts inside the period in one aggregate query (for the serializer)."""
        page = super().paginate_queryset(queryset)
        if page is not None and self.action == "list":
            self._page_in_period = self._in_period(page)
        return page

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "in_period": getattr(self, "_page_in_period", None)}

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
        rows = (
            JobSerializer(job, context={"in_period": in_period}).data
            for chunk in _chunks(jobs.iterator(chunk_size=CSV_CHUNK), CSV_CHUNK)
            for in_period in [self._in_period(chunk)]
            for job in chunk
        )
        response = StreamingHttpResponse(csv_stream(rows, columns), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="fleetwatt-jobs.csv"'
        return response


CSV_CHUNK = 1000  # jobs per read of the streamed CSV, and per query of their parts inside the period


def _chunks(rows: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
