"""`/api/focus/?month=YYYY-MM`: a month of the teams' usage as a FOCUS 1.2 file, CSV (default) or Parquet
(`?format=parquet` or `Accept: application/vnd.apache.parquet`), for the teams the user may see; with the
clusters' idle and unobserved cost for whoever sees every team."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.web.fields import MonthField
from apps.rollups.focus import csv_chunks, parquet_bytes
from apps.rollups.focus_selectors import focus_file_rows

PARQUET = "application/vnd.apache.parquet"


class FocusCSVRenderer(BaseRenderer):
    """Chooses CSV; the view writes the body itself (streamed)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return data if isinstance(data, bytes) else b""


class FocusParquetRenderer(BaseRenderer):
    media_type = PARQUET
    format = "parquet"
    charset = None
    render_style = "binary"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return data if isinstance(data, bytes) else b""


class FocusQuerySerializer(serializers.Serializer):
    month = MonthField(help_text="The calendar month (UTC), YYYY-MM, e.g. 2026-11.")


class FocusExportView(APIView):
    """A month as FOCUS 1.2 (docs/api.md, "FOCUS export"): one row per team, cluster, UTC day and charge
    (GPU-hours; facility energy), BilledCost in the currency's minor unit, adding up per team and day to the
    team's rollup to the cent; and per cluster, UTC day and charge the cost no team's jobs carry (`x_CostLine`
    idle, unobserved), adding up to the cluster's idle line. Members get their teams' rows; finance and admins
    every team's and the clusters' idle and unobserved rows."""

    renderer_classes = [FocusCSVRenderer, FocusParquetRenderer]

    def handle_exception(self, exc: Exception) -> Response:
        # Errors are JSON, as everywhere in the API, whatever file format was asked for.
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response

    @extend_schema(
        operation_id="focus_export",
        parameters=[
            FocusQuerySerializer,
            OpenApiParameter("format", OpenApiTypes.STR, enum=["csv", "parquet"], description="File format."),
        ],
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="FOCUS 1.2 rows, CSV (RFC 4180)."),
            (200, PARQUET): OpenApiResponse(OpenApiTypes.BINARY, description="FOCUS 1.2 rows, Parquet."),
            (400, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="A bad month."),
        },
    )
    def get(self, request: Request) -> HttpResponseBase:
        query = FocusQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month: date = query.validated_data["month"]
        rows = focus_file_rows(user=request.user, month=month)
        name = f"focus-{month:%Y-%m}"
        if request.accepted_renderer.format == "parquet":
            response: HttpResponseBase = HttpResponse(parquet_bytes(rows), content_type=PARQUET)
            response["Content-Disposition"] = f'attachment; filename="{name}.parquet"'
            return response
        # A month is bounded ((teams + 2) x clusters x days x 2 rows, read in three queries); its CSV goes out
        # streamed.
        response = StreamingHttpResponse(csv_chunks(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return response
