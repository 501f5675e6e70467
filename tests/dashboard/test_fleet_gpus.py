"""The fleet page's GPUs (templatetags/fleet_gpus.py): the heatmap's GPU that drew the most, and a GPU's one name."""

from __future__ import annotations

from typing import Any

import pytest

from apps.dashboard.templatetags.fleet_gpus import hottest_gpu
from apps.fleet.models import Cluster, Gpu, Node


def _row(name: str, power_w: list[int | None], hours: list[int | None]) -> dict[str, Any]:
    return {"name": name, "url": f"/gpus/{name}/", "power_w": power_w, "hours": hours, "held_pct": [0] * len(hours)}


def test_the_hottest_gpu_is_the_highest_mean_power_over_its_hours() -> None:
    # given a GPU that peaked higher for an hour, and one that drew more over the period
    grid = {
        "gpus": 3,
        "rows": [
            _row("c1 · n0/0", [700, 100, None], [1, 5, None]),  # (700 + 500) / 6 = 200 W
            _row("c1 · n0/1", [300, 250, 250], [2, 2, 2]),  # 266.7 W
            _row("c1 · n0/2", [None, None, None], [None, None, None]),  # no hour ingested
        ],
    }
    # then the hottest is the one with the highest mean over its hours, weighted by them
    hot = hottest_gpu(grid)
    assert hot is not None and hot["name"] == "c1 · n0/1" and hot["url"] == "/gpus/c1 · n0/1/"
    assert hot["power_w"] == pytest.approx(800 / 3) and hot["hours"] == 6


@pytest.mark.parametrize(
    "grid",
    [
        {"gpus": 130, "rows": [_row("c1 · n0/0", [75], [1])]},  # the grid holds only the least-drawing GPUs
        {"gpus": 1, "rows": [_row("c1 · n0/0", [None], [None])]},  # no hour
        {"gpus": 0, "rows": []},
        None,  # no grid (a member's fleet page)
    ],
)
def test_no_hottest_gpu_where_the_grid_cannot_say(grid: dict[str, Any] | None) -> None:
    assert hottest_gpu(grid) is None


@pytest.mark.django_db
def test_a_gpu_s_one_name_is_its_host_and_index() -> None:
    node = Node.objects.create(cluster=Cluster.objects.create(name="c1", prometheus_url="http://127.0.0.1:9"),
                               hostname="gpu-x01")  # fmt: skip
    assert str(Gpu.objects.create(node=node, uuid="GPU-1", index=4)) == "gpu-x01/4"
