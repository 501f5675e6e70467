"""The rollup endpoints: a team's, a cluster's and a job group's energy, cost and carbon per period, the teams
side by side, and how a job group's runs ended. Registered under the same prefixes as the objects they sum
(`/api/teams/{id}/rollup/`, ...); the objects themselves are listed by apps.fleet.api."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBase
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from apps.carbon.models import JobGroup
from apps.core.authentication import FLEET_WIDE
from apps.core.footprint import kwh
from apps.core.money import round_minor
from apps.core.page_cache import CachedPagesMixin, cached_page
from apps.fleet.models import Cluster, Team
from apps.rollups.selectors import (
    MixedBasisError,
    cluster_job_costs_minor,
    cluster_rollup_cache_key,
    cluster_rollup_cached,
    job_group_job_costs_minor,
    job_group_outcome_costs_minor,
    job_group_outcomes,
    job_group_rollup,
    rollup_kept,
    team_daily_energy,
    team_job_costs_minor,
    team_rollup_cache_key,
    team_rollup_cached,
    team_totals,
    team_totals_costs_minor,
)

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
    def _rollup(
        self,
        request: Request,
        compute: Callable[..., dict],
        costs_minor: Callable[..., dict[str, Decimal]],
        subject: tuple[str, str],
        cache_key: Callable[..., str] | None = None,
    ) -> HttpResponseBase:
        start, end, granularity = _period_query(request)
        query = {"start": start, "end": end, "granularity": granularity}

        def finished() -> dict:
            doc = _computed(compute, query)
            return _for_finance(doc, costs_minor(**query, currency=doc["currency"]))

        if request.accepted_renderer.format == "csv":
            return Response(_flat(finished(), subject, totals=_csv_totals(request)))
        if request.accepted_renderer.format != "json" or cache_key is None:
            # The document already has the schema's shape (RollupSerializer documents it): serialising a
            # year of days through DRF fields would cost more than computing it.
            return Response(_money_as_text(finished()))
        # Kept rendered (a year of days is ~90 KB of JSON): a dashboard's repeated ask is one cache read.
        key = f"{cache_key(**query)}:finance:json"
        body = rollup_kept(key, lambda: JSONRenderer().render(_money_as_text(finished())))
        return HttpResponse(body, content_type="application/json")


def _csv_totals(request: Request) -> bool:
    query = RollupQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return bool(query.validated_data["totals"])


def _computed(compute: Callable[..., dict], query: dict[str, Any]) -> dict:
    try:
        return compute(**query)
    except MixedBasisError as exc:
        raise ValidationError({"detail": str(exc)}) from None


_SUMMED = ("energy_j", "gpu_hours", "facility_kwh", "operational_kg", "embodied_kg")


def _line(figures: dict, *, exact: Decimal, minor: Decimal) -> dict:
    """A line's figures with kWh beside J, its cost in the currency's minor unit and its exact cost."""
    return {**figures, "energy_kwh": kwh(figures["energy_j"]), "cost": minor, "cost_exact": exact}


def _lines_added(lines: list[dict], zero: Decimal) -> dict:
    """Lines added up: their costs in minor units summed (not the exact sum rounded)."""
    figures = {k: sum((line[k] for line in lines), 0.0) for k in _SUMMED}
    exact = sum((line["cost_exact"] for line in lines), Decimal(0))
    return _line(figures, exact=exact, minor=sum((line["cost"] for line in lines), zero))


def _for_finance(doc: dict, costs_minor: dict[str, Decimal]) -> dict:
    """The rollup with kWh beside J, costs in the currency's minor unit (`cost`) and exact (`cost_exact`), and
    a totals line: a period's `cost` is the sum of its jobs' rounded costs (`costs_minor`), an idle line's its
    own cost rounded, the totals' the sum of the periods' (docs/api.md, "Money")."""
    currency = doc["currency"]
    zero = round_minor(Decimal(0), currency)
    periods, idle_lines = [], []
    for p in doc["periods"]:
        idle = p["idle"]
        if idle is not None:
            idle = _line(idle, exact=idle["cost"], minor=round_minor(idle["cost"], currency))
            idle_lines.append(idle)
        minor = round_minor(costs_minor.get(p["period"], zero), currency)
        periods.append({**_line(p, exact=p["cost"], minor=minor), "idle": idle})
    totals = _lines_added(periods, zero)
    totals["idle"] = _lines_added(idle_lines, zero) if idle_lines else None
    return {**doc, "periods": periods, "totals": totals}


def _money_as_text(value: Any) -> Any:
    """Decimals as exact text, as DRF's DecimalField writes them (its JSON encoder would make floats)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _money_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_money_as_text(v) for v in value]
    return value


def _csv_row(line: dict, first: dict) -> dict:
    row = {**first, **{k: v for k, v in line.items() if k not in ("idle", "energy_by_method_j", "period")}}
    row.update({f"energy_{m}_j": j for m, j in line.get("energy_by_method_j", {}).items()})
    row.update({f"idle_{k}": v for k, v in (line["idle"] or {}).items()})
    return row


def _flat(doc: dict, subject: tuple[str, str], *, totals: bool) -> list[dict]:
    """One CSV row per period naming the period, what it sums (team, cluster or job group), the currency and
    basis; then, unless `?totals=false`, a `total` row (the periods added up; its `cost` the sum of theirs)."""
    name, value = subject
    context = {name: value, "currency": doc["currency"], "intensity_basis": doc["intensity_basis"]}
    rows = [_csv_row(_money_as_text(p), {"period": p["period"], **context}) for p in doc["periods"]]
    if totals:
        rows.append(_csv_row(_money_as_text(doc["totals"]), {"period": "total", **context}))
    return rows


class TeamRollupViewSet(CachedPagesMixin, _RollupMixin, viewsets.GenericViewSet):
    """Each team's energy, cost and carbon per period, for the teams the user may see."""

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.visible_to(self.request.user).order_by("name")

    @extend_schema(parameters=[RollupQuerySerializer], responses=RollupSerializer)
    @action(detail=True, methods=["get"])
    @cached_page  # in front of the rollup's own document, kept for every viewer and format
    def rollup(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponseBase:
        team = self.get_object()
        return self._rollup(
            request,
            lambda **q: team_rollup_cached(team=team, **q),
            lambda **q: team_job_costs_minor(team=team, **q),
            ("team", team.name),
            cache_key=lambda **q: team_rollup_cache_key(team=team, **q),
        )

    @extend_schema(parameters=[PeriodQuerySerializer], responses=DailyEnergySerializer(many=True))
    @action(detail=False, methods=["get"], url_path="daily-energy", pagination_class=None)
    @cached_page
    def daily_energy(self, request: Request, format: str | None = None) -> Response:
        """GPU energy per day, team and split method (J and kWh) for the teams the user may see."""
        start, end, _ = _period_query(request)
        return Response(team_daily_energy(user=request.user, start=start, end=end))

    @extend_schema(parameters=[PeriodQuerySerializer], responses=TeamTotalsSerializer(many=True))
    @action(detail=False, methods=["get"], url_path="compare", pagination_class=None)
    @cached_page
    def compare(self, request: Request, format: str | None = None) -> Response:
        """The teams the user may see, side by side over the period (whole UTC days, as their rollups): GPU-hours,
        energy (J and kWh), facility kWh, CO2e, and cost in minor units (`cost`: the sum of the team's jobs' rounded
        costs, as its rollup's `totals.cost` over the same days) and exact (`cost_exact`). A
        team whose days span sites on different intensity bases is left out. `?format=csv` gives one row per
        team. Teams a member is not in are not listed; finance and admins see every team."""
        start, end, _ = _period_query(request)
        try:
            teams = team_totals(user=request.user, start=start, end=end)
        except MixedBasisError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        minor = team_totals_costs_minor(user=request.user, start=start, end=end)
        return Response(
            [
                {
                    **t,
                    "energy_kwh": kwh(t["energy_j"]),
                    "cost": str(minor.get(t["team"], Decimal("0.00"))),
                    "cost_exact": t["cost"],
                }
                for t in teams
            ]
        )


class ClusterRollupViewSet(CachedPagesMixin, _RollupMixin, viewsets.GenericViewSet):
    """Each cluster's jobs and idle line per period (admins and finance)."""

    permission_classes = FLEET_WIDE
    queryset = Cluster.objects.select_related("site").order_by("name")

    @extend_schema(parameters=[RollupQuerySerializer], responses=RollupSerializer)
    @action(detail=True, methods=["get"])
    @cached_page
    def rollup(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponseBase:
        cluster = self.get_object()
        return self._rollup(
            request,
            lambda **q: cluster_rollup_cached(cluster=cluster, **q),
            lambda **q: cluster_job_costs_minor(cluster=cluster, **q),
            ("cluster", cluster.name),
            cache_key=lambda **q: cluster_rollup_cache_key(cluster=cluster, **q),
        )


class JobGroupRollupViewSet(CachedPagesMixin, _RollupMixin, viewsets.GenericViewSet):
    """A job group's runs (failed and abandoned ones included) per period (finance, admins), and how they
    ended (everyone: a member's answer counts their teams' runs only)."""

    permission_classes = FLEET_WIDE
    queryset = JobGroup.objects.order_by("name")

    @extend_schema(parameters=[RollupQuerySerializer], responses=RollupSerializer)
    @action(detail=True, methods=["get"])
    @cached_page
    def rollup(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponseBase:
        group = self.get_object()
        return self._rollup(
            request,
            lambda **q: job_group_rollup(group=group, **q),
            lambda **q: job_group_job_costs_minor(group=group, **q),
            ("job_group", group.name),
        )

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
        try:
            doc = job_group_outcomes(
                user=request.user, start=start, end=end, groups=JobGroup.objects.filter(pk=group.pk)
            )
        except MixedBasisError as exc:
            raise ValidationError({"detail": str(exc)}) from None
        entry = doc["groups"][0]
        minor = job_group_outcome_costs_minor(
            user=request.user, start=start, end=end, group=group, currency=doc["currency"]
        )
        zero = round_minor(Decimal(0), doc["currency"])
        for o in entry["outcomes"]:
            o["cost_exact"], o["cost"] = o["cost"], minor.get(o["outcome"], zero)
        entry["total"]["cost_exact"] = entry["total"]["cost"]
        entry["total"]["cost"] = sum((o["cost"] for o in entry["outcomes"]), zero)
        context = {"currency": doc["currency"], "intensity_basis": doc["intensity_basis"]}
        if request.accepted_renderer.format == "csv":
            return Response(_money_as_text([{"job_group": entry["name"], **o, **context} for o in entry["outcomes"]]))
        body = {
            "job_group": entry["name"],
            **context,
            "intensity_zones": doc["intensity_zones"],
            "outcomes": entry["outcomes"],
            "total": entry["total"],
            "failed_cost_share": entry["failed_cost_share"],
        }
        return Response(_money_as_text(body))
