"""Reads of the ingested GPU-hours (apps.telemetry.selectors): the agent's sampled seconds over jobs' spans
come back only where an hour was not watched whole, and read exactly as every row would; a GPU's power limit and SM
clock over a period (the worked example of docs/arithmetic.md), unknown where no GPU-hour knew them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.jobs.summary import unobserved_s
from apps.telemetry.models import GpuHour
from apps.telemetry.selectors import PeriodSettings, gpu_sampled_seconds, gpu_settings_over
from tests.carbon.fleet_builder import fleet_build

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, tzinfo=UTC)
H, M = timedelta(hours=1), timedelta(minutes=1)


def test_sampled_seconds_read_as_every_row_would() -> None:
    a, b, c = fleet_build(servers=1, gpus_per_server=3).gpus
    watched = {  # (GPU, hour) -> sampled seconds; no row: the agent did not watch it
        (a, 0): 3600.0, (a, 1): 1200.0, (a, 3): 3600.0, (a, 4): 3600.0,
        (b, 0): 0.0, (b, 1): 3600.0, (b, 2): 3600.0,
        (c, 5): 3600.0,  # outside every span
    }  # fmt: skip
    for (gpu, h), seconds in watched.items():
        GpuHour.objects.create(gpu=gpu, hour=T0 + h * H, source="agent", device_energy_j=1.0, sampled_s=seconds)
    spans = {a.pk: (T0 + 10 * M, T0 + 4 * H + 5 * M), b.pk: (T0, T0 + 2 * H + 59 * M)}

    sampled = gpu_sampled_seconds(spans=spans)

    every_row = {(g.pk, T0 + h * H): s for (g, h), s in watched.items()}
    for gpu_id, (lo, hi) in spans.items():
        hour = lo.replace(minute=0)
        while hour <= hi:
            assert sampled.get((gpu_id, hour), 0.0) == every_row.get((gpu_id, hour), 0.0), (gpu_id, hour)
            hour += H
        assert unobserved_s(gpu_id=gpu_id, start=lo, end=hi, gpu_sampled=sampled) == unobserved_s(
            gpu_id=gpu_id, start=lo, end=hi, gpu_sampled=every_row
        )
    assert (c.pk, T0 + 5 * H) not in sampled  # not in a span: not read
    assert len(sampled) == 5 + 3 == len(list(sampled))
    assert unobserved_s(gpu_id=a.pk, start=T0, end=T0 + 5 * H, gpu_sampled=sampled) == 2400.0 + 3600.0


def test_no_spans_read_nothing() -> None:
    assert len(gpu_sampled_seconds(spans={})) == 0


# docs/arithmetic.md, "A GPU's settings over a period": (limit mean, least, most, SM clock mean) per hour from T0.
SETTINGS_HOURS = [
    (700.0, 700.0, 700.0, 1980.0),  # 700 W all hour
    (600.0, 500.0, 700.0, 1800.0),  # capped to 500 W at half past
    (500.0, 500.0, 500.0, 1410.0),
    (None, None, None, None),  # an older agent, an exporter without the fields: unknown
]


def settings_hours_store(gpu) -> None:
    """The worked example's four GPU-hours (tests/api/test_gpu_hours_api.py reads them through the API too)."""
    for h, (mean, least, most, clock) in enumerate(SETTINGS_HOURS):
        GpuHour.objects.create(
            gpu=gpu, hour=T0 + h * H, source="agent", device_energy_j=1.0e6, power_limit_w=mean,
            power_limit_min_w=least, power_limit_max_w=most, sm_clock_mhz=clock,
        )  # fmt: skip


def test_a_gpu_s_settings_over_a_period_are_the_worked_example_of_the_docs() -> None:
    # given
    gpu, other = fleet_build(servers=1, gpus_per_server=2).gpus
    settings_hours_store(gpu)
    GpuHour.objects.create(gpu=other, hour=T0, source="agent", device_energy_j=1.0, power_limit_w=300.0,
                           power_limit_min_w=300.0, power_limit_max_w=300.0, sm_clock_mhz=900.0)  # fmt: skip
    # when
    whole = gpu_settings_over(gpu_id=gpu.pk, start=T0, end=T0 + 4 * H)
    # then: the mean of the known hours' means, each hour alike; the least and most seen; how many hours knew them
    assert whole == PeriodSettings(
        hours=4, power_limit_w=600.0, power_limit_min_w=500.0, power_limit_max_w=700.0, power_limit_hours=3,
        sm_clock_mhz=pytest.approx(1730.0), sm_clock_hours=3,
    )  # fmt: skip
    assert gpu_settings_over(gpu_id=gpu.pk, start=T0 + H, end=None).power_limit_w == 550.0
    assert gpu_settings_over(gpu_id=gpu.pk, start=None, end=T0 + H).power_limit_max_w == 700.0


def test_a_period_nobody_exported_the_settings_in_is_unknown_not_zero() -> None:
    (gpu,) = fleet_build(servers=1, gpus_per_server=1).gpus
    settings_hours_store(gpu)
    unknown = gpu_settings_over(gpu_id=gpu.pk, start=T0 + 3 * H, end=T0 + 4 * H)
    assert unknown == PeriodSettings(1, None, None, None, 0, None, 0)
    later = gpu_settings_over(gpu_id=gpu.pk, start=T0 + 9 * H, end=None)
    assert later == PeriodSettings(0, None, None, None, 0, None, 0)
