"""Reads of the ingested GPU-hours (apps.telemetry.selectors): the agent's sampled seconds over jobs' spans
come back only where an hour was not watched whole, and read exactly as every row would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.jobs.summary import unobserved_s
from apps.telemetry.models import GpuHour
from apps.telemetry.selectors import gpu_sampled_seconds
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
