"""The fleet page's GPU heatmap (apps/dashboard/heatmap.py): each GPU's mean power per hour, day or week, in one
query, at most MAX_GPUS rows (the least-drawing), each row linked to its GPU's page; for admins and finance."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.dashboard import heatmap
from apps.dashboard.heatmap import MAX_COLUMNS, gpu_power_grid, heatmap_bucket
from apps.rollups.services import day_sums_refresh
from tests.carbon.fleet_builder import T0
from tests.dashboard.fleet_world import HOUR, PERIOD, FleetWorld, fleet_world_build, module_world
from tests.factories import ClusterFactory, GpuFactory, GpuHourFactory

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def world(django_db_setup: None, django_db_blocker: Any) -> Iterator[FleetWorld]:
    yield from module_world(django_db_blocker, fleet_world_build)


@pytest.mark.parametrize(
    ("days", "bucket"), [(1, HOUR), (7, HOUR), (8, DAY), (MAX_COLUMNS, DAY), (MAX_COLUMNS + 1, 7 * DAY), (400, 7 * DAY)]
)
def test_the_columns_are_hours_then_days_then_weeks(days: int, bucket: timedelta) -> None:
    assert heatmap_bucket(T0, T0 + days * DAY) == bucket
    assert days * DAY / bucket <= MAX_COLUMNS or bucket == 7 * DAY


def test_each_gpu_s_row_holds_its_mean_power_per_hour_read_in_two_queries(world: FleetWorld) -> None:
    # when the grid of the world's day is read
    with CaptureQueriesContext(connection) as queries:
        grid = gpu_power_grid(start=T0, end=T0 + DAY)
    assert len(queries) == 2  # the grid, and its GPUs' names
    # then 24 hour columns from the period's start, a row per GPU with an hour, in the cluster's order
    assert grid["bucket_h"] == 1 and len(grid["columns"]) == 24 and grid["columns"][0] == T0.isoformat()
    assert [r["name"] for r in grid["rows"]] == [f"c1 · c1-n0/{i}" for i in range(4)]
    a, b, c, idle = grid["rows"]
    assert a["power_w"][:3] == [500, 500, None] and a["held_pct"][:2] == [100, 100] and a["hours"][:2] == [1, 1]
    assert b["power_w"][:2] == [500, 500]
    assert (c["power_w"][:2], c["held_pct"][0]) == ([300, None], 50)  # seen half the hour: held half of it
    assert idle["power_w"][:2] == [75, 75] and idle["held_pct"][:2] == [0, 0]
    # and each row links to its GPU's page for the same period
    assert a["url"] == f"/gpus/{world.gpus[0].pk}/?start=2026-11-02&end=2026-11-03"
    assert grid["gpus"] == 4


def test_a_long_period_is_summed_per_day(world: FleetWorld) -> None:
    grid = gpu_power_grid(start=T0, end=T0 + 30 * DAY)
    assert grid["bucket_h"] == 24 and len(grid["columns"]) == 30
    a = grid["rows"][0]
    # two hours at 500 W: the day's cell is their mean, over the hours ingested
    assert (a["power_w"][0], a["held_pct"][0], a["hours"][0]) == (500, 100, 2)
    assert a["power_w"][1] is None


def test_over_the_cap_the_least_drawing_gpus_are_shown(world: FleetWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heatmap, "MAX_GPUS", 2)
    grid = gpu_power_grid(start=T0, end=T0 + DAY)
    # the idle GPU (75 W) and job C's (300 W), still in the cluster's order; all four counted
    assert [r["name"] for r in grid["rows"]] == ["c1 · c1-n0/2", "c1 · c1-n0/3"]
    assert grid["gpus"] == 4


def test_the_page_draws_it_for_admins_and_finance_only(world: FleetWorld) -> None:
    for user, shown in ((world.admin, True), (world.finance, True), (world.member, False)):
        client = Client()
        client.force_login(user)
        html = client.get("/", PERIOD).content.decode()
        assert ('id="gpu-heatmap"' in html) is shown
        assert ("fleet-heatmap.js" in html) is shown
        if shown:
            data = json.loads(re.search(r'<script id="gpu-heatmap-data" type="application/json">(.*?)</script>',
                                        html, re.S).group(1))  # fmt: skip
            # the rows' links, listed for the keyboard too
            for row in data["rows"]:
                assert f'<a href="{row["url"].replace("&", "&amp;")}">' in html


@pytest.mark.parametrize("seed", range(3))
def test_a_week_of_hours_is_read_from_the_gpus_days_as_from_the_gpu_hours(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given GPUs of random power and occupancy at random hours of a week, their days summed as the derivation sums them
    rng = random.Random(seed)
    cluster = ClusterFactory()
    for _ in range(7):
        gpu = GpuFactory(node__cluster=cluster)
        for hour in sorted(rng.sample(range(7 * 24), rng.randint(0, 60))):
            GpuHourFactory(gpu=gpu, hour=T0 + hour * HOUR, device_energy_j=rng.uniform(0, 2.6e6),
                           occupied_s=rng.choice([0.0, 1800.0, rng.uniform(0, 3600)]))  # fmt: skip
    day_sums_refresh(cluster_ids=[cluster.pk], days=[T0.date() + timedelta(days=d) for d in range(7)])
    for days, cap in ((1, 128), (7, 128), (7, 3)):
        monkeypatch.setattr(heatmap, "MAX_GPUS", cap)
        # when the grid of whole days of hours is read from the GPUs' days, and from the GPU-hours
        from_days = heatmap._grid(T0, T0 + days * DAY)
        monkeypatch.setattr(heatmap, "whole_days", lambda start, end: None)
        from_rows = heatmap._grid(T0, T0 + days * DAY)
        monkeypatch.undo()
        # then they are the same grid, cell for cell, the same GPUs ranked by their mean power
        assert from_days == from_rows
        assert from_days["gpus"] == len({r["name"] for r in from_rows["rows"]}) or cap < from_days["gpus"]
