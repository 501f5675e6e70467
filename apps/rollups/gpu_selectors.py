"""The GPU list's sums over a period (`/api/gpus/`): each GPU's GPU-hours, energy and allocated time, read from its
days (GpuDay) for the whole UTC days of the period and from its GPU-hour rows for the hours of a day cut by the
period's ends, so a page of GPUs reads a few hundred rows a GPU at most, however long the period."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import (
    Aggregate,
    Count,
    Expression,
    Field,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce

from apps.fleet.models import Gpu
from apps.telemetry.models import GpuHour

from .models import GpuDay

# Each sum the list shows, by its name in the answer: the column it sums (GpuDay's, named as the GPU-hour rows').
GPU_SUMS = {
    "energy_j": "device_energy_j",
    "jobs_energy_j": "jobs_energy_j",
    "idle_energy_j": "idle_energy_j",
    "occupied_s": "occupied_s",
    "unobserved_j": "unobserved_j",
    "estimated_j": "estimated_j",
    "estimated_s": "estimated_s",
}


@dataclass(frozen=True)
class PeriodSplit:
    """[start, end) (either open) as its whole UTC days (`first_day` to `after_day`, exclusive; None: open) and the
    hours of cut days at either end, read from the rows (`rows`: the filter of those hours; None: none)."""

    first_day: date | None
    after_day: date | None
    whole_days: bool
    rows: Q | None


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def period_split(*, start: datetime | None, end: datetime | None) -> PeriodSplit:
    """Split [start, end) into its whole UTC days and the hours before the first and from the last midnight."""
    first = None if start is None else start.astimezone(UTC)
    last = None if end is None else end.astimezone(UTC)
    first_day = None if first is None else (first.date() if first.time() == time(0) else first.date() + timedelta(1))
    after_day = None if last is None else last.date()
    if first_day is not None and after_day is not None and first_day >= after_day:
        return PeriodSplit(None, None, False, Q(hour__gte=first, hour__lt=last))  # no whole day: the rows alone
    edges = []
    if first is not None and first_day is not None and first < _midnight(first_day):
        edges.append(Q(hour__gte=first, hour__lt=_midnight(first_day)))
    if last is not None and after_day is not None and _midnight(after_day) < last:
        edges.append(Q(hour__gte=_midnight(after_day), hour__lt=last))
    rows = None
    for edge in edges:
        rows = edge if rows is None else rows | edge
    return PeriodSplit(first_day, after_day, True, rows)


def _per_gpu(rows: QuerySet[Any], aggregate: Aggregate, output: Field) -> Expression:
    """A GPU's `aggregate` over `rows`, zero where none: one correlated subquery, which Postgres runs after the sort
    and the limit, for the GPUs of the page only."""
    total = rows.filter(gpu=OuterRef("pk")).order_by().values("gpu").annotate(total=aggregate).values("total")
    return Coalesce(Subquery(total, output_field=output), Value(0, output_field=output), output_field=output)


def gpus_with_sums(*, start: datetime | None, end: datetime | None) -> QuerySet[Gpu]:
    """Every GPU with its sums over [start, end) (either open) as GPU_SUMS names them, and `hours_count`: its
    GPU-hour rows there. Equal to the sums of its GPU-hour rows in the period (tests/rollups/test_gpu_days.py)."""
    split = period_split(start=start, end=end)
    floats, count = FloatField(), IntegerField()
    # Each sum's terms: the whole days' (GpuDay) and the cut days' hours (GpuHour), each as (rows, aggregate).
    terms: dict[str, list[tuple[QuerySet[Any], Aggregate]]] = {name: [] for name in [*GPU_SUMS, "hours_count"]}
    if split.whole_days:
        days = GpuDay.objects.all()
        if split.first_day is not None:
            days = days.filter(day__gte=split.first_day)
        if split.after_day is not None:
            days = days.filter(day__lt=split.after_day)
        terms["hours_count"].append((days, Sum("hours")))
        for name, column in GPU_SUMS.items():
            terms[name].append((days, Sum(column)))
    if split.rows is not None:
        hours = GpuHour.objects.filter(split.rows)
        terms["hours_count"].append((hours, Count("pk")))
        for name, column in GPU_SUMS.items():
            terms[name].append((hours, Sum(column)))
    sums = {}
    for name, parts in terms.items():
        output = count if name == "hours_count" else floats
        added: Expression = Value(0, output_field=output)
        for k, (rows, aggregate) in enumerate(parts):
            term = _per_gpu(rows, aggregate, output)
            added = term if k == 0 else added + term
        sums[name] = added
    return Gpu.objects.annotate(**sums)
