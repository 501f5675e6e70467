"""Reads of the frontier of recurring workloads (docs/arithmetic.md, "The frontier of a recurring workload"): each job
group's finished runs with their work, time, energy and power limit, their frontier and advice, and what the advice
would have saved over a month. The arithmetic is apps.jobs.frontier's (pure).

Only the runs of `jobs` count: the caller passes Job.objects.visible_to(user) (or a team's jobs), so a member's
frontier is made of their teams' runs and names no group they do not run.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, F, FloatField, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum

from apps.jobs.frontier import J_PER_KWH, MIN_RUNS_DEFAULT, SLACK_DEFAULT, VARIED_W, Frontier, Run, Saving
from apps.jobs.frontier import frontier as frontier_of
from apps.jobs.frontier import saving as saving_of
from apps.jobs.models import Job, JobGpuHour, JobWorkHour, Source
from apps.telemetry.models import GpuHour

from .models import GpuModel, JobGroup


@dataclass(frozen=True)
class GroupFrontier:
    """A group's frontier over the runs of `jobs`, with the unit it counts in and its GPU model's TDP."""

    group: JobGroup
    frontier: Frontier
    runs: int  # finished runs of the group in `jobs`, placed or not
    other_unit_runs: int  # runs that counted another unit than the group's, or none
    gpu_model: str
    tdp_w: float | None
    placed: tuple[Run, ...] = ()  # the runs in its unit, each with when it ended


def _units(job_ids: list[int]) -> dict[int, dict[str, float]]:
    """Each job's own counter's units per unit over its whole run (one query)."""
    out: dict[int, dict[str, float]] = defaultdict(dict)
    rows = (
        JobWorkHour.objects.filter(job_id__in=job_ids)
        .exclude(unit="")
        .values("job_id", "unit")
        .annotate(units=Sum("units"))
        .order_by()
    )
    for r in rows:
        out[r["job_id"]][r["unit"]] = r["units"] or 0.0
    return out


def _limits(job_ids: list[int]) -> dict[int, tuple[float | None, bool]]:
    """Each job's power limit, the mean of its measured GPU-hours' limits weighted by its seconds there, and whether it
    changed inside it (a GPU-hour's least and most apart, or its GPU-hours' limits apart, by more than VARIED_W).
    One aggregate query; each GPU-hour read by its unique key (gpu, hour)."""

    def setting(column: str) -> Subquery:
        hours = GpuHour.objects.filter(gpu_id=OuterRef("gpu_id"), hour=OuterRef("hour")).values(column)[:1]
        return Subquery(hours, output_field=FloatField())

    rows = (
        JobGpuHour.objects.filter(job_id__in=job_ids)
        .exclude(source=Source.ESTIMATED)
        .annotate(
            limit=setting("power_limit_w"),
            hour_least=setting("power_limit_min_w"),
            hour_most=setting("power_limit_max_w"),
        )
        .values("job_id")
        .annotate(
            weighted=Sum(F("limit") * F("sampled_s"), filter=Q(limit__isnull=False)),
            seconds=Sum("sampled_s", filter=Q(limit__isnull=False)),
            known=Count("id", filter=Q(limit__isnull=False)),
            least=Min("hour_least"),
            most=Max("hour_most"),
        )
        .order_by()
    )
    out: dict[int, tuple[float | None, bool]] = {}
    for r in rows:
        if not r["known"]:
            out[r["job_id"]] = (None, False)
            continue
        cap = r["weighted"] / r["seconds"] if r["seconds"] else (r["least"] + r["most"]) / 2
        varied = r["least"] is not None and r["most"] is not None and r["most"] - r["least"] > VARIED_W
        out[r["job_id"]] = (cap, varied)
    return out


def _gpu_model(job_ids: list[int]) -> tuple[str, float | None]:
    """The GPU model most of the jobs' GPU-hours ran on, and its TDP in the fleet config (None where not named)."""
    names = Counter(
        dict(
            JobGpuHour.objects.filter(job_id__in=job_ids)
            .values_list("gpu__model_name")
            .annotate(n=Count("id"))
            .order_by()
            .values_list("gpu__model_name", "n")
        )
    )
    if not names:
        return "", None
    name = max(names, key=lambda n: (names[n], n))
    tdp = GpuModel.objects.filter(name=name).values_list("tdp_w", flat=True).first()
    return name, tdp


def group_runs(
    *, group: JobGroup, jobs: QuerySet[Job], ended_before: datetime | None = None
) -> tuple[str, list[Run], int]:
    """The group's finished runs among `jobs` (ended before `ended_before` where given) in the unit most of them
    count, each with its work, wall time, energy and power limit; and how many counted another unit or none. A run's
    units are its own counter's (`fleetwatt_job_work_units_total`), else the work it reported with its unit."""
    finished = jobs.filter(job_group=group, start__isnull=False, end__isnull=False)
    if ended_before is not None:
        finished = finished.filter(end__lt=ended_before)
    meta = list(finished.values_list("id", "start", "end", "energy_j", "work_units", "work_unit", "gpu_count"))
    ids = [m[0] for m in meta]
    counted = _units(ids)
    per_job: dict[int, dict[str, float]] = {}
    for job_id, _, _, _, reported, reported_unit, _ in meta:
        per_job[job_id] = counted.get(job_id) or ({reported_unit or "run": reported} if reported else {})
    tally = Counter(u for units in per_job.values() for u in units)
    if not tally:
        return "", [], len(meta)
    unit = max(tally, key=lambda u: (tally[u], u))
    limits = _limits(ids)
    runs, other = [], 0
    for job_id, start, end, energy_j, _, _, gpus in meta:
        units = per_job[job_id].get(unit)
        if units is None or start is None or end is None:
            other += 1
            continue
        cap, varied = limits.get(job_id, (None, False))
        runs.append(
            Run(job_id=job_id, seconds=(end - start).total_seconds(), units=units, energy_j=energy_j, cap_w=cap,
                varied=varied, gpus=gpus or 1, ended=end)
        )  # fmt: skip
    return unit, runs, other


def group_frontier(
    *,
    group: JobGroup,
    jobs: QuerySet[Job],
    slack: float = SLACK_DEFAULT,
    min_runs: int = MIN_RUNS_DEFAULT,
    ended_before: datetime | None = None,
) -> GroupFrontier:
    """The group's frontier over its finished runs among `jobs`."""
    unit, runs, other = group_runs(group=group, jobs=jobs, ended_before=ended_before)
    model, tdp = _gpu_model([r.job_id for r in runs])
    result = frontier_of(runs, unit=unit, slack=slack, min_runs=min_runs, top_w=tdp)
    return GroupFrontier(
        group=group,
        frontier=result,
        runs=len(runs) + other,
        other_unit_runs=other,
        gpu_model=model,
        tdp_w=tdp,
        placed=tuple(runs),
    )


@dataclass(frozen=True)
class GroupSaving:
    """What a group's runs that ended in a period would have saved at its chosen point."""

    entry: GroupFrontier
    saving: Saving
    gpu_kwh: float
    facility_kwh: float | None  # None: the period's runs have no footprint yet
    co2e_kg: float | None  # operational; None: no grid intensity
    cost: Decimal | None  # the electricity's; None: the runs' sites price in several currencies
    currency: str


def _ratios(job_ids: list[int]) -> tuple[float | None, float | None, Decimal | None, str]:
    """The jobs' facility kWh per GPU kWh, operational kg per facility kWh, and electricity price per facility kWh
    (their sites' prices weighted by facility kWh; None across currencies) with its currency."""
    jobs = Job.objects.filter(pk__in=job_ids)
    sums = jobs.aggregate(
        gpu_j=Sum("energy_j"),
        facility=Sum("facility_kwh"),
        kg=Sum("operational_kg", filter=Q(operational_kg__isnull=False)),
        kg_facility=Sum("facility_kwh", filter=Q(operational_kg__isnull=False)),
    )
    facility_per_gpu = sums["facility"] / (sums["gpu_j"] / J_PER_KWH) if sums["gpu_j"] and sums["facility"] else None
    kg_per_facility = sums["kg"] / sums["kg_facility"] if sums["kg_facility"] else None
    prices = list(
        jobs.filter(cluster__site__isnull=False)
        .values("cluster__site__electricity_price_per_kwh", "cluster__site__currency")
        .annotate(kwh=Sum("facility_kwh"))
        .order_by()
    )
    currencies = {p["cluster__site__currency"] for p in prices}
    if len(currencies) != 1:
        return facility_per_gpu, kg_per_facility, None, ",".join(sorted(currencies))
    total = sum(p["kwh"] or 0.0 for p in prices)
    if total <= 0:
        price = prices[0]["cluster__site__electricity_price_per_kwh"]
    else:
        price = sum(
            (p["cluster__site__electricity_price_per_kwh"] * Decimal(repr(p["kwh"] or 0.0)) for p in prices), Decimal(0)
        ) / Decimal(repr(total))
    return facility_per_gpu, kg_per_facility, price, currencies.pop()


def group_saving(*, entry: GroupFrontier, start: datetime, end: datetime) -> GroupSaving:
    """What the group's runs of its frontier that ended in [start, end) would have saved at its chosen point, in GPU
    and facility kWh, operational kg CO2e (the runs' own kg per facility kWh) and the electricity's cost (their sites'
    price). The runs are the frontier's own, in its unit: not read again."""
    runs = [r for r in entry.placed if r.ended is not None and start <= r.ended < end]
    found = saving_of(entry.frontier, runs)
    facility_per_gpu, kg_per_facility, price, currency = _ratios([r.job_id for r in runs])
    gpu_kwh = found.energy_j / J_PER_KWH
    facility = gpu_kwh * facility_per_gpu if facility_per_gpu is not None else None
    kg = facility * kg_per_facility if facility is not None and kg_per_facility is not None else None
    cost = (
        (Decimal(repr(facility)) * price).quantize(Decimal("0.000001"))
        if facility is not None and price is not None
        else None
    )
    return GroupSaving(
        entry=entry, saving=found, gpu_kwh=gpu_kwh, facility_kwh=facility, co2e_kg=kg, cost=cost, currency=currency
    )


def frontiers(
    *,
    jobs: QuerySet[Job],
    slack: float = SLACK_DEFAULT,
    min_runs: int = MIN_RUNS_DEFAULT,
    ended_before: datetime | None = None,
) -> list[GroupFrontier]:
    """The frontier of every job group with a finished run among `jobs` that counts its work, by group name."""
    groups = JobGroup.objects.filter(
        pk__in=jobs.filter(job_group__isnull=False, end__isnull=False).values("job_group_id")
    ).order_by("name")
    out = []
    for group in groups:
        entry = group_frontier(group=group, jobs=jobs, slack=slack, min_runs=min_runs, ended_before=ended_before)
        if entry.frontier.unit:
            out.append(entry)
    return out


def fleet_saving(
    *,
    jobs: QuerySet[Job],
    start: datetime,
    end: datetime,
    slack: float = SLACK_DEFAULT,
    min_runs: int = MIN_RUNS_DEFAULT,
) -> list[GroupSaving]:
    """Per group with a finished run among `jobs` up to `end`: its frontier over its runs that ended before `end`, and
    what its runs that ended in [start, end) would have saved at its chosen point."""
    return [
        group_saving(entry=entry, start=start, end=end)
        for entry in frontiers(jobs=jobs, slack=slack, min_runs=min_runs, ended_before=end)
    ]
