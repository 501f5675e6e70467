"""The GPU list's sums (`/api/gpus/`, apps.rollups.gpu_selectors) read each GPU's days (GpuDay) and the hours of a
day cut by the period: the same figures as summed from the GPU-hour rows, on a random fleet and any period, as the
derivation keeps the days, and after the rows of old months are dropped."""

from __future__ import annotations

import math
import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models import Count, Q, Sum

from apps.fleet.models import Gpu
from apps.pipeline.derive import Fact, Scope, derive
from apps.pipeline.inputs import footprints_recompute
from apps.rollups.gpu_selectors import GPU_SUMS, gpus_with_sums, period_split
from apps.rollups.models import GpuDay
from apps.rollups.services import day_sums_refresh
from apps.telemetry.models import GpuHour
from apps.telemetry.partitions import hour_rows_expire, partitions_ensure
from tests.carbon.fleet_builder import fleet_build, intensity_set, job_run
from tests.factories import ClusterFactory, GpuFactory, GpuHourFactory

pytestmark = pytest.mark.django_db

DAY0 = datetime(2026, 11, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _from_rows(start: datetime | None, end: datetime | None) -> dict[int, dict[str, Any]]:
    """The oracle: each GPU's GPU-hour rows in [start, end) summed in Python (exactly, then rounded once)."""
    rows = GpuHour.objects.all()
    if start is not None:
        rows = rows.filter(hour__gte=start)
    if end is not None:
        rows = rows.filter(hour__lt=end)
    columns = ["gpu_id", *GPU_SUMS.values()]
    by_gpu: dict[int, list[tuple[Any, ...]]] = {pk: [] for pk in Gpu.objects.values_list("pk", flat=True)}
    for row in rows.values_list(*columns):
        by_gpu[row[0]].append(row[1:])
    return {
        pk: {"hours_count": len(got)} | {name: math.fsum(r[k] for r in got) for k, name in enumerate(GPU_SUMS)}
        for pk, got in by_gpu.items()
    }


def _listed(start: datetime | None, end: datetime | None) -> dict[int, dict[str, Any]]:
    names = ["hours_count", *GPU_SUMS]
    return {r["pk"]: {n: r[n] for n in names} for r in gpus_with_sums(start=start, end=end).values("pk", *names)}


def _approx(sums: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Floats to their last bits (days are added up, not rows), counts exact."""
    return {
        pk: {k: v if isinstance(v, int) else pytest.approx(v, rel=1e-12, abs=1e-9) for k, v in s.items()}
        for pk, s in sums.items()
    }


def _random_fleet(rng: random.Random) -> None:
    """A few GPUs in two clusters, each with GPU-hours at random hours of five days, of random figures."""
    clusters = [ClusterFactory(), ClusterFactory()]
    for k in range(6):
        gpu = GpuFactory(node__cluster=clusters[k % 2])
        for hour in sorted(rng.sample(range(5 * 24), rng.randint(0, 40))):
            device = rng.uniform(0, 2.6e6)
            jobs = device * rng.random()
            unobserved = (device - jobs) * rng.random()
            GpuHourFactory(
                gpu=gpu, hour=DAY0 + hour * HOUR, device_energy_j=device, jobs_energy_j=jobs,
                idle_energy_j=device - jobs - unobserved, unobserved_j=unobserved,
                estimated_j=unobserved * rng.random(), occupied_s=rng.uniform(0, 3600), estimated_s=rng.uniform(0, 600),
            )  # fmt: skip
    for cluster in clusters:
        day_sums_refresh(cluster_ids=[cluster.pk], days=[DAY0.date() + timedelta(d) for d in range(5)])


def _periods(rng: random.Random) -> list[tuple[datetime | None, datetime | None]]:
    """Open ends, whole days, days cut by either end at an hour or within one, and periods inside one day."""

    def moment() -> datetime:
        return DAY0 + timedelta(hours=rng.randint(-12, 6 * 24), minutes=rng.choice([0, 0, 17]))

    periods: list[tuple[datetime | None, datetime | None]] = [
        (None, None), (DAY0, DAY0 + 5 * 24 * HOUR), (DAY0 + 5 * HOUR, None), (None, DAY0 + 30 * HOUR),
        (DAY0 + 3 * HOUR, DAY0 + 9 * HOUR), (DAY0 + 23 * HOUR, DAY0 + 25 * HOUR),
        (DAY0 + timedelta(hours=4, minutes=30), DAY0 + timedelta(days=2, hours=1, minutes=1)),
    ]  # fmt: skip
    for _ in range(12):
        a, b = sorted([moment(), moment()])
        periods.append((a, b))
    return periods


@pytest.mark.parametrize("seed", range(4))
def test_the_gpu_list_s_sums_are_those_of_the_rows_for_any_period_on_a_random_fleet(seed: int) -> None:
    # given a random fleet whose days are summed
    rng = random.Random(seed)
    _random_fleet(rng)
    # then every GPU's sums over any period are its rows' there
    for start, end in _periods(rng):
        assert _listed(start, end) == _approx(_from_rows(start, end)), (start, end)


def test_the_gpu_list_s_sums_are_those_the_list_summed_from_the_rows_before() -> None:
    # given a random fleet whose days are summed
    rng = random.Random(7)
    _random_fleet(rng)
    # then the sums are the ones the list's query summed from the rows (each GPU joined to its hours)
    for start, end in _periods(rng):
        period = Q()
        if start is not None:
            period &= Q(hours__hour__gte=start)
        if end is not None:
            period &= Q(hours__hour__lt=end)
        sums = {"hours_count": Count("hours", filter=period)}
        sums |= {name: Sum(f"hours__{column}", filter=period) for name, column in GPU_SUMS.items()}
        before = {
            r.pop("pk"): {k: (0.0 if v is None else v) for k, v in r.items()}
            for r in Gpu.objects.annotate(**sums).values("pk", *sums)
        }
        assert _listed(start, end) == _approx(before), (start, end)


def test_a_period_splits_into_its_whole_days_and_the_hours_of_its_cut_days() -> None:
    # a whole day and a half: the day, then the hours of the next one's first half
    split = period_split(start=DAY0, end=DAY0 + 36 * HOUR)
    assert (split.first_day, split.after_day, split.whole_days) == (DAY0.date(), DAY0.date() + timedelta(1), True)
    assert split.rows == Q(hour__gte=DAY0 + 24 * HOUR, hour__lt=DAY0 + 36 * HOUR)
    # within one day: its rows alone
    split = period_split(start=DAY0 + HOUR, end=DAY0 + 3 * HOUR)
    assert not split.whole_days and split.rows == Q(hour__gte=DAY0 + HOUR, hour__lt=DAY0 + 3 * HOUR)
    # whole days, an end open, the other given in another zone (midnight UTC at 02:00 in +02:00)
    split = period_split(start=datetime.fromisoformat("2026-11-02T02:00:00+02:00"), end=None)
    assert (split.first_day, split.after_day, split.rows) == (date(2026, 11, 2), None, None)
    split = period_split(start=None, end=datetime.fromisoformat("2026-11-04T01:30:00+02:00"))
    assert (split.first_day, split.after_day) == (None, date(2026, 11, 3))
    assert split.rows == Q(
        hour__gte=datetime(2026, 11, 3, tzinfo=UTC), hour__lt=datetime(2026, 11, 3, 23, 30, tzinfo=UTC)
    )


def _days_are_the_rows() -> None:
    """Every GPU's day holds its rows' sums, and no day is kept without rows."""
    rows = GpuHour.objects.all()
    expected: dict[tuple[int, date], dict[str, Any]] = {}
    for gpu_id, hour, *values in rows.values_list("gpu_id", "hour", *GPU_SUMS.values()):
        day = expected.setdefault((gpu_id, hour.astimezone(UTC).date()), {"hours": 0, "values": []})
        day["hours"] += 1
        day["values"].append(values)
    kept = {(d.gpu_id, d.day): d for d in GpuDay.objects.all()}
    assert kept.keys() == expected.keys()
    for key, day in kept.items():
        assert day.hours == expected[key]["hours"]
        for k, column in enumerate(GPU_SUMS.values()):
            assert getattr(day, column) == pytest.approx(math.fsum(v[k] for v in expected[key]["values"]), rel=1e-12)


def test_the_derivation_keeps_each_gpu_s_days() -> None:
    # given a job and idle hours, derived as an ingest does
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 48)
    job_run(fleet, key="slurm/a", gpus=fleet.gpus[:2], hours=30, power_w=400)
    footprints_recompute()
    assert GpuDay.objects.count() == 4
    _days_are_the_rows()
    # when one of its hours is ingested again with more energy, and derived
    hour = GpuHour.objects.filter(gpu=fleet.gpus[0]).order_by("hour").last()
    assert hour is not None
    GpuHour.objects.filter(pk=hour.pk).update(device_energy_j=hour.device_energy_j + 5e5, unobserved_j=5e5)
    with transaction.atomic():
        derive(Scope(cluster_ids=frozenset({fleet.cluster.pk}), start=hour.hour, end=hour.hour + HOUR),
               changed={Fact.JOB_ROWS})  # fmt: skip
    # then its day holds it
    _days_are_the_rows()
    assert _listed(None, None) == _approx(_from_rows(None, None))


@pytest.mark.parametrize("seed", range(3))
def test_each_gpu_s_day_keeps_its_hours_as_its_rows_have_them(seed: int) -> None:
    # given a random fleet whose days are summed (some GPUs with hours missing, some days without any)
    _random_fleet(random.Random(seed))
    days = list(GpuDay.objects.all())
    assert days
    for day in days:
        # then each day has its GPU-hours' hours of the day and own figures, in their order (the heatmap's cells)
        midnight = datetime.combine(day.day, datetime.min.time(), tzinfo=UTC)
        rows = GpuHour.objects.filter(gpu_id=day.gpu_id, hour__gte=midnight, hour__lt=midnight + 24 * HOUR)
        hours = list(rows.order_by("hour").values_list("hour", "device_energy_j", "occupied_s"))
        assert day.hours_of_day == [h.hour for h, _, _ in hours] and day.hours == len(hours)
        assert (day.hour_device_energy_j, day.hour_occupied_s) == ([d for _, d, _ in hours], [o for _, _, o in hours])


def test_the_gpus_days_of_months_past_retention_go_with_their_rows() -> None:
    # given GPU-hours in October and November, their days summed
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    job_run(fleet, key="slurm/oct", gpus=fleet.gpus[:2], hours=5, power_w=400, start=datetime(2026, 10, 5, tzinfo=UTC))
    job_run(fleet, key="slurm/nov", gpus=fleet.gpus[1:3], hours=3, power_w=600, start=datetime(2026, 11, 2, tzinfo=UTC))
    partitions_ensure(date(2026, 10, 1), date(2026, 11, 1))
    footprints_recompute()
    assert GpuDay.objects.filter(day__lt=date(2026, 11, 1)).exists()
    # when the months before November are dropped
    hour_rows_expire(horizon=date(2026, 11, 1))
    # then the GPUs' days before it are gone too: the list starts at the horizon, as the rows do
    assert not GpuDay.objects.filter(day__lt=date(2026, 11, 1)).exists()
    _days_are_the_rows()
    assert _listed(None, None) == _approx(_from_rows(None, None))
