"""The rollup endpoints: a team's, a cluster's and a job group's energy, cost and carbon per period, the teams
side by side, and how a job group's runs ended. Registered under the same prefixes as the objects they sum
(`/api/teams/{id}/rollup/`, ...); the objects themselves are listed by apps.fleet.api."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBase
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from apps.carbon.models import JobGroup
from apps.core.access.authentication import FLEET_WIDE
from apps.core.page_cache import CachedPagesMixin, cached_page, cached_page_or_previous
from apps.core.units.money import round_minor
from apps.core.web.params import ID_PATTERN
from apps.fleet.models import Cluster, Team
from apps.rollups import documents
from apps.rollups.compare_selectors import team_daily_energy
from apps.rollups.finance import BAND_KEYS, csv_quantity, money_as_text
from apps.rollups.outcome_selectors import job_group_outcomes_booked
from apps.rollups.selectors import MixedBasisError

from .serializers import (
    DailyEnergySerializer,
    JobGroupOutcomesSerializer,
    PeriodQuerySerializer,
    RollupQuerySerializer,
    RollupSerializer,
    TeamTotalsSerializer,
)


def _period_query(request: Request) -> tuple[datetime, datetime, str]:
    """`?start=&end=&granularity=` checked (a clear 400 otherwise)."""
    query = RollupQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query.validated_data["start"], query.validated_data["end"], query.validated_data["granularity"]


class _RollupMixin:
    _page_generation = 0  # (CachedPagesMixin's: the generation the page is kept under)

    def _rollup(self, request: Request, kind: str, subject: Team | Cluster | JobGroup) -> HttpResponseBase:
        start, end, granularity = _period_query(request)
        ask = documents.Ask(kind, subject.pk, start, end, granularity)
        if request.accepted_renderer.format == "json":
            # Kept rendered (a year of days is ~90 KB of JSON) and prepared again after each ingest
            # (apps.rollups.documents): a dashboard's ask is one cache read.
            return HttpResponse(self._document(ask, subject), content_type="application/json")
        # The document already has the schema's shape (RollupSerializer documents it): serialising a year of
        # days through DRF fields would cost more than computing it.
        try:
            finished = documents.ROLLUPS[kind].for_finance(subject, ask)
        except MixedBasisError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        if request.accepted_renderer.format == "csv":
            return Response(_flat(finished, (kind, subject.name), totals=_csv_totals(request)))
        return Response(money_as_text(finished))

    def _document(self, ask: documents.Ask, subject: Any) -> Any:
        """The kept document; one kept before an ingest in progress makes a page of its generation, not the
        current one's (answered again until the new document is prepared, as the document itself)."""
        try:
            value, generation = documents.kept(ask, subject)
        except MixedBasisError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        self._page_generation = min(self._page_generation, generation)
        return value


def _csv_totals(request: Request) -> bool:
    query = RollupQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return bool(query.validated_data["totals"])


def _csv_row(line: dict, first: dict) -> dict:
    skipped = ("idle", "unobserved", "waste", "energy_by_method_j", "period", *BAND_KEYS)
    row = {**first, **{k: v for k, v in line.items() if k not in skipped}}
    row.update({f"energy_{m}_j": j for m, j in line.get("energy_by_method_j", {}).items()})
    row.update({f"idle_{k}": v for k, v in (line["idle"] or {}).items()})
    row.update({f"unobserved_{k}": v for k, v in (line.get("unobserved") or {}).items()})
    # Added with issue 34, after the old columns: a team's waste, then the energy's interval.
    row.update({f"waste_{k}": v for k, v in (line.get("waste") or {}).items()})
    row.update({k: line[k] for k in BAND_KEYS if k in line})
    return row


def _flat(doc: dict, subject: tuple[str, str], *, totals: bool) -> list[dict]:
    """One CSV row per period naming the period, what it sums (team, cluster or job group), the currency and
    basis; then, unless `?totals=false`, a `total` row (the periods added up; its `cost` the sum of theirs)."""
    name, value = subject
    context = {name: value, "currency": doc["currency"], "intensity_basis": doc["intensity_basis"]}
    rows = [_csv_row(money_as_text(p), {"period": p["period"], **context}) for p in doc["periods"]]
    if totals:
        rows.append(_csv_row(money_as_text(doc["totals"]), {"period": "total", **context}))
    return rows


class TeamRollupViewSet(CachedPagesMixin, _RollupMixin, viewsets.GenericViewSet):
    """Each team's energy, cost and carbon per period, for the teams the user may see."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.visible_to(self.request.user).order_by("name")

    @extend_schema(parameters=[RollupQuerySerializer], responses=RollupSerializer)
    @action(detail=True, methods=["get"])
    @cached_page_or_previous  # in front of the rollup's own document, kept for every viewer and format
    def rollup(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponseBase:
        team = self.get_object()
        return self._rollup(request, "team", team)

    @extend_schema(parameters=[PeriodQuerySerializer], responses=DailyEnergySerializer(many=True))
    @action(detail=False, methods=["get"], url_path="daily-energy", pagination_class=None)
    @cached_page
    def daily_energy(self, request: Request, format: str | None = None) -> Response:
        """GPU energy per day, team and split method (J and kWh) for the teams the user may see."""
        start, end, _ = _period_query(request)
        return Response(team_daily_energy(user=request.user, start=start, end=end))

    @extend_schema(parameters=[PeriodQuerySerializer], responses=TeamTotalsSerializer(many=True))
    @action(detail=False, methods=["get"], url_path="compare", pagination_class=None)
    @cached_page_or_previous
    def compare(self, request: Request, format: str | None = None) -> Response:
        """The teams the user may see, side by side over the period (whole UTC days, as their rollups): GPU-hours,
        energy (J and kWh), facility kWh, CO2e, and cost in minor units (`cost`: the sum of the team's jobs' rounded
        costs, as its rollup's `totals.cost` over the same days) and exact (`cost_exact`). A
        team whose days span sites on different intensity bases is left out. `?format=csv` gives one row per
        team. Teams a member is not in are not listed; finance and admins see every team. After those (issue 35):
        `display_name`, `currency`, `period_start` and `period_end` (the whole UTC days summed, the end exclusive)
        and `cost_minor` (`cost` as a whole number of the currency's minor units: cents, yen); the CSV writes its
        quantities to 6 decimal places."""
        start, end, _ = _period_query(request)
        if request.user.pk is None:  # (the permissions let only users in)
            raise NotAuthenticated()
        ask = documents.Ask("teams_compared", request.user.pk, start, end)
        teams = self._document(ask, request.user)
        if request.accepted_renderer.format == "csv":
            teams = [{k: csv_quantity(v) if isinstance(v, float) else v for k, v in t.items()} for t in teams]
        return Response(teams)


class ClusterRollupViewSet(CachedPagesMixin, _RollupMixin, viewsets.GenericViewSet):
    """Each cluster's jobs and idle line per period (admins and finance)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    permission_classes = FLEET_WIDE
    queryset = Cluster.objects.select_related("site").order_by("name")

    @extend_schema(parameters=[RollupQuerySerializer], responses=RollupSerializer)
    @action(detail=True, methods=["get"])
    @cached_page_or_previous
    def rollup(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponseBase:
        cluster = self.get_object()
        return self._rollup(request, "cluster", cluster)


class JobGroupRollupViewSet(CachedPagesMixin, _RollupMixin, viewsets.GenericViewSet):
    """A job group's runs (failed and abandoned ones included) per period (finance, admins), and how they
    ended (everyone: a member's answer counts their teams' runs only)."""

    lookup_value_regex = ID_PATTERN  # an id in ASCII digits (apps.core.web.params)
    permission_classes = FLEET_WIDE
    queryset = JobGroup.objects.order_by("name")

    @extend_schema(parameters=[RollupQuerySerializer], responses=RollupSerializer)
    @action(detail=True, methods=["get"])
    @cached_page_or_previous
    def rollup(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponseBase:
        group = self.get_object()
        return self._rollup(request, "job_group", group)

    @extend_schema(parameters=[PeriodQuerySerializer], responses=JobGroupOutcomesSerializer)
    @action(detail=True, methods=["get"], permission_classes=api_settings.DEFAULT_PERMISSION_CLASSES)
    @cached_page
    def outcomes(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """The group's runs of the period split by how they ended: completed, failed (failed, timeout,
        out_of_memory, node_fail), cancelled (cancelled, preempted), other (running, pending, unknown), each
        with its GPU-hours, energy, CO2e and cost: what the delivered model cost, failures included. Finance
        and admins count every team's runs; a member their teams' runs only."""
        group = self.get_object()
        query = PeriodQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.validated_data["start"], query.validated_data["end"]
        try:  # the figures and the costs in minor units from one read of the rows
            doc, minor = job_group_outcomes_booked(
                user=request.user, start=start, end=end, groups=JobGroup.objects.filter(pk=group.pk)
            )
        except MixedBasisError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        entry = doc["groups"][0]
        zero = round_minor(Decimal(0), doc["currency"])
        for o in entry["outcomes"]:
            o["cost_exact"], o["cost"] = o["cost"], minor.get((group.pk, o["outcome"]), zero)
        entry["total"]["cost_exact"] = entry["total"]["cost"]
        entry["total"]["cost"] = sum((o["cost"] for o in entry["outcomes"]), zero)
        context = {"currency": doc["currency"], "intensity_basis": doc["intensity_basis"]}
        if request.accepted_renderer.format == "csv":
            return Response(money_as_text([{"job_group": entry["name"], **o, **context} for o in entry["outcomes"]]))
        body = {
            "job_group": entry["name"],
            **context,
            "intensity_zones": doc["intensity_zones"],
            "outcomes": entry["outcomes"],
            "total": entry["total"],
            "failed_cost_share": entry["failed_cost_share"],
        }
        return Response(money_as_text(body))
