"""The frontier of recurring workloads (docs/api.md, "The frontier of a recurring workload"):
`/api/job-groups/{id}/frontier/`, one group's points per power limit with its advice or plan, and `/api/frontier/`,
every group's with what its advice would have saved over a month. A member's answer is made of their teams' runs only: a
group none of them ran is not found, and none is listed."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.carbon.frontier_selectors import fleet_saving, group_frontier
from apps.carbon.models import JobGroup
from apps.core.web.params import ID_PATTERN, month_after
from apps.jobs.frontier import MIN_RUNS_DEFAULT, SLACK_DEFAULT
from apps.jobs.models import Job

from .frontier_serializers import (
    FleetFrontierQuerySerializer,
    FleetFrontierSerializer,
    FrontierQuerySerializer,
    GroupFrontierSerializer,
    frontier_document,
    saving_document,
    totals_document,
)


def _query(serializer: type[FrontierQuerySerializer], request: Request) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - set(serializer().fields) - {"format"})
    if unknown:
        raise ValidationError({"detail": f"Unknown query parameters: {', '.join(unknown)}."})
    query = serializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return {"slack": SLACK_DEFAULT, "min_runs": MIN_RUNS_DEFAULT, **query.validated_data}


class JobGroupFrontierViewSet(viewsets.GenericViewSet):
    """A job group's frontier over the finished runs the user may see."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    pagination_class = None
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]  # nested lists: no CSV
    serializer_class = GroupFrontierSerializer
    queryset = JobGroup.objects.order_by("name")

    @extend_schema(parameters=[FrontierQuerySerializer], responses=GroupFrontierSerializer)
    @action(detail=True, methods=["get"])
    def frontier(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """The group's runs per power limit (time and energy per unit of work: median, quartiles, runs), its Pareto
        front, and the advice (the least energy per unit within `slack` more time per unit than the most used limit,
        from limits with `min_runs` runs), or, where every run ran at one limit, a plan to measure others. A group
        none of the user's teams ran is not found."""
        group = self.get_object()
        params = _query(FrontierQuerySerializer, request)
        jobs = Job.objects.visible_to(request.user)
        if not jobs.filter(job_group=group).exists():
            raise Http404
        entry = group_frontier(group=group, jobs=jobs, slack=params["slack"], min_runs=params["min_runs"])
        return Response(GroupFrontierSerializer(frontier_document(entry)).data)


class FrontierViewSet(viewsets.ViewSet):
    """The frontier of every job group the user's runs belong to, and what its advice would have saved in a month."""

    pagination_class = None
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]  # nested lists: no CSV

    @extend_schema(parameters=[FleetFrontierQuerySerializer], responses=FleetFrontierSerializer)
    def list(self, request: Request, format: str | None = None) -> Response:
        """Per job group with finished runs the user may see (by name; `?team=` narrows to one team's runs): its
        frontier over its runs that ended before the month's end, and what its runs that ended in `?month=` would have
        saved at the advised limit (GPU and facility kWh, kg CO2e, the electricity's cost, and the longer time it
        costs), with the groups' totals."""
        params = _query(FleetFrontierQuerySerializer, request)
        jobs: QuerySet[Job] = Job.objects.visible_to(request.user)
        if params.get("team"):
            jobs = jobs.filter(team__name=params["team"])
        first = params["month"]
        start = datetime.combine(first, time(0), tzinfo=UTC)
        end = datetime.combine(month_after(first), time(0), tzinfo=UTC)
        groups = fleet_saving(jobs=jobs, start=start, end=end, slack=params["slack"], min_runs=params["min_runs"])
        document = {
            "month": f"{first:%Y-%m}", "slack": params["slack"], "min_runs": params["min_runs"],
            "groups": [saving_document(g) for g in groups], "totals": totals_document(groups),
        }  # fmt: skip
        return Response(FleetFrontierSerializer(document).data)
