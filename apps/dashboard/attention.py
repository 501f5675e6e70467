"""What needs attention on the fleet page: the strip at its top. Each item is read in a fixed number of queries,
whatever the number of jobs, GPUs or clusters, and scoped as the rest of the page: a member sees the findings and
jobs of their teams and the ingest of the clusters those jobs ran on; the fleet's scheduler sync and its meters are
for admins and finance (who see every team), the sync's error text for admins (as the status page)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q

from apps.core.access.policy import user_sees_all_teams
from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job
from apps.rollups.team_selectors import with_rows_in
from apps.telemetry.health import ingest_lag_check
from apps.telemetry.models import IngestWatermark
from apps.telemetry.selectors import clusters_meterless_gpus
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste

User = AbstractBaseUser | AnonymousUser


@dataclass(frozen=True)
class WasteAtStake:
    """The waste findings that count (open or disputed, of jobs on their team's bill) worth something in the
    period, as the audit queue and the team page count them: each clipped to the period, a GPU-hour once."""

    findings: int
    gpu_hours: float
    cost: list[tuple[Decimal, str]]  # per currency: a fleet may bill in several


@dataclass(frozen=True)
class ClusterLag:
    cluster: str
    ingested_through: datetime | None  # every hour before it is ingested; None: never
    lag_h: int | None  # closed hours not ingested yet (/healthz's figure)
    over_limit: bool  # more than FLEETWATT_INGEST_MAX_LAG_H: /healthz fails it


@dataclass(frozen=True)
class SyncError:
    cluster: str
    error: str


@dataclass(frozen=True)
class MeterlessGpus:
    cluster: str
    gpus: list[dict[str, Any]]  # as the ingest recorded them: uuid, hostname, missing fields


@dataclass(frozen=True)
class Attention:
    waste: WasteAtStake
    ingest: list[ClusterLag]
    max_lag_h: int
    low_coverage: int
    sync_errors: list[SyncError] | None  # None: not the viewer's to see
    meterless: list[MeterlessGpus] | None

    @property
    def behind(self) -> list[ClusterLag]:
        """The clusters with a closed hour not ingested yet (or never ingested)."""
        return [c for c in self.ingest if c.lag_h is None or c.lag_h > 0]

    @property
    def meterless_gpus(self) -> int:
        return sum(len(m.gpus) for m in self.meterless or [])


def fleet_attention(*, user: User, start: datetime, end: datetime, now: datetime, low_coverage: int) -> Attention:
    """The strip's items for this viewer and period; `low_coverage`: the page's count of jobs under the coverage
    threshold (it lists them, so it is not read twice)."""
    sees_all = user_sees_all_teams(user)  # type: ignore[arg-type]
    clusters = Cluster.objects.order_by("name")
    if not sees_all:  # the clusters the viewer's jobs of the period ran on
        ran = Job.objects.visible_to(user).filter(start__lt=end).seen_since(start).values("cluster_id")
        clusters = clusters.filter(pk__in=ran)
    listed = list(clusters.only("name", "scheduler", "scheduler_status"))
    return Attention(
        waste=waste_at_stake(user=user, start=start, end=end),
        ingest=_ingest_lags(listed, now=now),
        max_lag_h=settings.FLEETWATT_INGEST_MAX_LAG_H,
        low_coverage=low_coverage,
        sync_errors=[SyncError(c.name, c.scheduler_status) for c in listed if c.scheduler and c.scheduler_status]
        if sees_all
        else None,
        meterless=_meterless(listed) if sees_all else None,
    )


def waste_at_stake(*, user: User, start: datetime, end: datetime) -> WasteAtStake:
    """Four queries: the teams, the findings' rows in the period (period_waste's two: the findings of jobs with rows
    in it) and their jobs' currencies."""
    teams = Team.objects.visible_to(user).values_list("pk", flat=True)
    flags = counted_flags(
        Flag.objects.visible_to(user)
        .filter(with_rows_in(team_ids=list(teams), start=start, end=end), job__start__lt=end)
        .filter(Q(job__last_seen__gte=start) | Q(job__last_seen__isnull=True))
    )
    found = period_waste(flags=flags, start=start, end=end)
    if not found.per_flag:
        return WasteAtStake(findings=0, gpu_hours=0.0, cost=[])
    currencies = dict(Job.objects.filter(pk__in=list(found.per_job)).values_list("pk", "currency"))
    cost: dict[str, Decimal] = defaultdict(Decimal)
    for job_id, worth in found.per_job.items():  # each job's findings once: the union, as `total`
        cost[currencies.get(job_id, "")] += worth.cost
    return WasteAtStake(
        findings=len(found.per_flag),
        gpu_hours=found.total.gpu_hours,
        cost=[(amount, currency) for currency, amount in sorted(cost.items())],
    )


def _ingest_lags(clusters: list[Cluster], *, now: datetime) -> list[ClusterLag]:
    marks = dict(
        IngestWatermark.objects.filter(cluster__in=[c.pk for c in clusters]).values_list(
            "cluster_id", "ingested_through"
        )
    )
    max_lag_h = settings.FLEETWATT_INGEST_MAX_LAG_H
    out = []
    for c in clusters:
        check = ingest_lag_check(ingested_through=marks.get(c.pk), now=now, max_lag_h=max_lag_h)
        out.append(ClusterLag(c.name, marks.get(c.pk), check["lag_h"], not check["ok"]))
    return out


def _meterless(clusters: list[Cluster]) -> list[MeterlessGpus]:
    found = clusters_meterless_gpus()
    return [MeterlessGpus(c.name, found[c.pk]) for c in clusters if found.get(c.pk)]
