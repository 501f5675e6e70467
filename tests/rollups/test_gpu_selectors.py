"""The GPU list's sums over a period (apps/rollups/gpu_selectors.py): a period split into its whole UTC days and the
hours of the days it cuts at either end; each GPU's sums its GPU-hours' in the period, whole days read from its days
only, zero for a GPU without any. A random fleet's: tests/rollups/test_gpu_days.py."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.db.models import Count, Q, Sum
from django.test.utils import CaptureQueriesContext

from apps.rollups.gpu_selectors import GPU_SUMS, PeriodSplit, gpus_with_sums, period_split
from apps.telemetry.models import GpuHour
from tests.factories import GpuFactory
from tests.rollups.day_world import DAY1, DAY2, END, HOUR, START, T0, DayWorld, day_world_build


def test_a_period_cut_at_both_ends_is_its_whole_days_and_the_hours_before_and_after_them() -> None:
    split = period_split(start=T0 + 20 * HOUR, end=T0 + 50 * HOUR)
    assert split == PeriodSplit(
        first_day=DAY2,
        after_day=date(2026, 11, 4),
        whole_days=True,
        rows=Q(hour__gte=T0 + 20 * HOUR, hour__lt=T0 + 24 * HOUR)
        | Q(hour__gte=T0 + 48 * HOUR, hour__lt=T0 + 50 * HOUR),
    )


def test_a_period_across_midnight_without_a_whole_day_is_its_rows_alone() -> None:
    split = period_split(start=T0 + 20 * HOUR, end=T0 + 26 * HOUR)
    assert split == PeriodSplit(None, None, False, Q(hour__gte=T0 + 20 * HOUR, hour__lt=T0 + 26 * HOUR))


def test_whole_days_and_an_open_period_read_no_rows() -> None:
    assert period_split(start=START, end=END) == PeriodSplit(DAY1, date(2026, 11, 4), True, None)
    assert period_split(start=None, end=None) == PeriodSplit(None, None, True, None)
    # a start in another zone that is a UTC midnight (01:00 in Berlin in November)
    berlin = datetime(2026, 11, 2, 1, tzinfo=ZoneInfo("Europe/Berlin"))
    assert period_split(start=berlin, end=None) == PeriodSplit(DAY1, None, True, None)


@pytest.fixture
def world(db: None) -> DayWorld:
    return day_world_build()


def _from_rows(start: datetime | None, end: datetime | None) -> dict[int, dict[str, Any]]:
    rows = GpuHour.objects.all()
    if start is not None:
        rows = rows.filter(hour__gte=start)
    if end is not None:
        rows = rows.filter(hour__lt=end)
    sums = rows.values("gpu_id").annotate(hours_count=Count("id"), **{k: Sum(c) for k, c in GPU_SUMS.items()})
    return {r.pop("gpu_id"): r for r in sums.order_by()}


def _listed(start: datetime | None, end: datetime | None) -> dict[int, dict[str, Any]]:
    gpus = gpus_with_sums(start=start, end=end).values("pk", "hours_count", *GPU_SUMS)
    return {r.pop("pk"): r for r in gpus}


@pytest.mark.parametrize(
    ("start", "end"),
    [(START, END), (T0 + HOUR, T0 + 26 * HOUR), (T0 + 23 * HOUR, T0 + 25 * HOUR), (None, None), (T0 + 5 * HOUR, None)],
)
def test_each_gpus_sums_are_its_gpu_hours_in_the_period(world: DayWorld, start: Any, end: Any) -> None:
    listed, expected = _listed(start, end), _from_rows(start, end)
    for gpu in world.gpus:
        mine = expected.get(gpu.pk, {})
        assert listed[gpu.pk]["hours_count"] == mine.get("hours_count", 0)
        for name in GPU_SUMS:
            assert listed[gpu.pk][name] == pytest.approx(mine.get(name) or 0.0, rel=1e-12), name


def test_whole_days_are_read_from_the_gpus_days_and_a_gpu_without_any_sums_to_zero(world: DayWorld) -> None:
    # given a GPU that never reported
    silent = GpuFactory(node__cluster=world.cluster)
    # when the list reads whole days
    with CaptureQueriesContext(connection) as read:
        listed = _listed(START, END)
    # then from the days (GpuDay), no GPU-hour row; the silent GPU at zero
    assert not [q["sql"] for q in read.captured_queries if "telemetry_gpuhour" in q["sql"]]
    assert listed[silent.pk] == {"hours_count": 0, **dict.fromkeys(GPU_SUMS, 0.0)}
    assert sum(r["hours_count"] for r in listed.values()) == GpuHour.objects.count()
