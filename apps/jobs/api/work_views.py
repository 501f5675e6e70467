"""`/api/work/`: the work the serving jobs the user may see served over a period, per model, team or cluster, with
its energy, carbon and money per token (apps.jobs.per_token)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.page_cache import CachedPagesMixin, cached_page
from apps.jobs.models import Job
from apps.jobs.per_token import per_token
from apps.jobs.selectors import serving_jobs

from .work_serializers import PerTokenSerializer, WorkQuerySerializer, per_token_row


class WorkViewSet(CachedPagesMixin, viewsets.ViewSet):
    """Tokens and requests served (the serving engines' Prometheus counters, read each hour) and what they cost."""

    @extend_schema(parameters=[WorkQuerySerializer], responses=PerTokenSerializer(many=True))
    @cached_page
    def list(self, request: Request, format: str | None = None) -> Response:
        """Per model (`?group_by=model`, the default), team or cluster, over `?start=&end=` (or `?month=`,
        `?week=`): output and prompt tokens, requests, the serving jobs' GPU energy, CO2e and billed cost over the
        period, and J, Wh, g CO2e per 1,000 output tokens and cost per million. Only the jobs of the teams the
        user may see; `?team=` and `?cluster=` (names) narrow them. `?format=csv`: one row per line."""
        unknown = sorted(set(request.query_params) - set(WorkQuerySerializer().fields) - {"format"})
        if unknown:
            raise ValidationError({"detail": f"Unknown query parameters: {', '.join(unknown)}."})
        query = WorkQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        jobs = Job.objects.visible_to(request.user)
        if params.get("team"):
            jobs = jobs.filter(team__name=params["team"])
        if params.get("cluster"):
            jobs = jobs.filter(cluster__name=params["cluster"])
        groups = per_token(
            serving_jobs(jobs=jobs, start=params["start"], end=params["end"]), group_by=params["group_by"]
        )
        return Response([per_token_row(g, group_by=params["group_by"]) for g in groups])
