"""Teams' daily sums (apps.rollups.services.day_sums_refresh): each method's joules count once, also where a
job has two rows in one GPU-hour (what an agent saw and what nobody saw, estimated)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from apps.jobs.models import JobGpuHour, JobGpuHourEnergy
from apps.rollups.models import TeamDay
from apps.rollups.services import day_sums_refresh
from tests.carbon.fleet_builder import fleet_build, job_run

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, 22, tzinfo=UTC)


def test_a_measured_and_an_estimated_row_in_one_gpu_hour_count_their_joules_once() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    job = job_run(fleet, key="j1", gpus=[gpu], hours=3, power_w=100.0, start=T0)  # 22:00 to 01:00 the next day
    JobGpuHour.objects.create(job=job, gpu=gpu, hour=T0, source="estimated", energy_j=5000.0, occupancy_s=300)
    JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=T0, method="estimated", energy_j=5000.0)

    day_sums_refresh(cluster_ids=[fleet.cluster.pk], days=[date(2026, 11, 2), date(2026, 11, 3)])

    days = {d.day: d for d in TeamDay.objects.filter(cluster=fleet.cluster)}
    assert set(days) == {date(2026, 11, 2), date(2026, 11, 3)}
    first, second = days[date(2026, 11, 2)], days[date(2026, 11, 3)]
    assert first.energy_j == 2 * 360_000.0 + 5000.0
    assert first.energy_by_method_j == {"whole_gpu": 720_000.0, "estimated": 5000.0}
    assert sum(first.energy_by_method_j.values()) == first.energy_j
    assert (second.energy_j, second.energy_by_method_j) == (360_000.0, {"whole_gpu": 360_000.0})
    assert first.occupancy_s == 2 * 3600.0 + 300.0
