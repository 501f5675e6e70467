"""/api/when-to-run/: the when-to-run hints of the flexible job groups of the teams the user may see, with their
hints of record of a period checked against the intensity that came (docs/api.md, "When to run")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.carbon.when_selectors import CheckedHint, GroupHint, WhenToRun, when_to_run
from apps.core.web.params import ID_PATTERN
from apps.fleet.models import Team

from .serializers import PAST_DAYS_DEFAULT, WhenToRunQuerySerializer, WhenToRunSerializer


def _hint(h: GroupHint) -> dict[str, Any]:
    return {
        "job_group": h.group, "zone": h.zone, "basis": h.basis,
        "typical_run": {"runs": h.run.runs, "length_h": h.run.length_h, "facility_kwh": h.run.facility_kwh,
                        "facility_kwh_by_hour": list(h.run.kwh)},
        "forecast": {"kind": h.forecast.kind, "source": h.forecast.source, "start": h.forecast.start,
                     "kg_per_kwh": h.forecast.values},
        "best_start": h.best_start,
        "now_kg": h.best.now_kg if h.best else None,
        "best_kg": h.best.best_kg if h.best else None,
        "saving_kg": h.best.saving_kg if h.best else None,
        "saving_pct": h.best.saving_pct if h.best else None,
        "text": h.text,
    }  # fmt: skip


def _past(c: CheckedHint) -> dict[str, Any]:
    h, check = c.hint, c.check
    return {
        "job_group": h.job_group.name, "zone": h.zone, "made_at": h.made_at, "best_start": h.best_start,
        "forecast_kind": h.forecast_kind, "forecast_source": h.forecast_source,
        "claimed_kg": check.claimed_kg, "claimed_pct": check.claimed_pct, "real_kg": check.real_kg,
        "real_pct": check.real_pct, "best_real_kg": check.best_real_kg,
        "forecast_error_pct": check.forecast_error_pct, "hours_compared": check.hours_compared,
    }  # fmt: skip


def _document(doc: WhenToRun, start: datetime, end: datetime) -> dict[str, Any]:
    return {
        "team": doc.team.name, "team_id": doc.team.pk, "made_at": doc.made_at, "deadline_h": doc.deadline_h,
        "hints": [_hint(h) for h in doc.hints], "past_start": start, "past_end": end,
        "past_hints": [_past(c) for c in doc.past],
        "summary": [
            {"job_group": s.group, "zone": s.zone, "hints": s.hints, "checked": s.checked, "claimed_kg": s.claimed_kg,
             "real_kg": s.real_kg, "best_real_kg": s.best_real_kg, "runs": s.runs,
             "measured_shift_kg": s.measured_shift_kg}
            for s in doc.summary
        ],
    }  # fmt: skip


class WhenToRunViewSet(viewsets.GenericViewSet):
    """When to run each team's flexible job groups: for each group (and grid zone) the team ran in the last weeks,
    its typical run, the zone's forecast (imported, or the zone's profile of recent weeks, labelled so) and the
    cleanest start within FLEETWATT_SHIFT_DEADLINE_H hours, as of this hour; and the hints of record of a period
    (`?start=&end=`, default the last 7 days) against the intensity that came. A member sees their teams' only:
    another team is not found (404), and no group appears through a team it does not run in."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    pagination_class = None
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]  # nested lists: no CSV
    serializer_class = WhenToRunSerializer

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.visible_to(self.request.user).order_by("name")

    def _answer(self, request: Request, teams: list[Team]) -> list[dict[str, Any]]:
        query = WhenToRunQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        now = timezone.now()
        end = query.validated_data.get("end") or now
        start = query.validated_data.get("start") or end - timedelta(days=PAST_DAYS_DEFAULT)
        if start >= end:
            raise ValidationError({"start": ["start must be before end."]})
        start, end = start.astimezone(UTC), end.astimezone(UTC)
        docs = when_to_run(teams=teams, now=now, start=start, end=end, shown=None)
        return [dict(WhenToRunSerializer(_document(d, start, end)).data) for d in docs]

    @extend_schema(parameters=[WhenToRunQuerySerializer], responses=WhenToRunSerializer(many=True))
    def list(self, request: Request, format: str | None = None) -> Response:
        """The when-to-run hints of every team the user may see, by name: its flexible groups' hints as of this hour
        and its hints of record of the period checked against the intensity that came (docs/api.md, "When to run")."""
        return Response(self._answer(request, list(self.get_queryset())))

    @extend_schema(parameters=[WhenToRunQuerySerializer], responses=WhenToRunSerializer)
    def retrieve(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """One team's when-to-run hints (its id); another team's is not found."""
        return Response(self._answer(request, [self.get_object()])[0])
