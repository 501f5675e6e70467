"""The fleet page's GPUs (templatetags/fleet_gpus.py): the heatmap's GPU that drew the most, a GPU's one name, and
each cluster's list of GPU links."""

from __future__ import annotations

from datetime import date
from itertools import groupby
from typing import Any

import pytest
from django.template import Context, Template
from django.utils.html import json_script

from apps.dashboard.templatetags.fleet_gpus import cluster_gpu_links, grid_json_script, hottest_gpu
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


# The list as the fleet page's template wrote it, a loop per node and per GPU (cluster_gpu_links builds it at once).
_TEMPLATE_LOOP = (
    "{% load fleet_gpus %}{% for host, gpus in nodes %}<li>{% for g in gpus %}<a href=\"{% url 'dashboard:gpu' g.pk %}"
    "?start={{ start|date:'Y-m-d' }}&amp;end={{ end|date:'Y-m-d' }}\">{{ g }}</a>{% if not forloop.last %}, {% endif %}"
    "{% endfor %}</li>{% empty %}<li>No GPU known yet.</li>{% endfor %}"
)


@pytest.mark.django_db
def test_a_cluster_s_gpu_links_are_those_the_template_loop_wrote() -> None:
    # given a cluster of two nodes (one with a name to escape) and an empty one
    cluster, empty = Cluster.objects.create(name="c1"), Cluster.objects.create(name="c2")
    for hostname in ("n1", "n0<&>"):
        node = Node.objects.create(cluster=cluster, hostname=hostname)
        for index in (2, 0, 1):
            Gpu.objects.create(node=node, uuid=f"GPU-{hostname}-{index}", index=index)
    start, end = date(2026, 11, 2), date(2026, 11, 9)
    for c in (cluster, empty):
        gpus = Gpu.objects.filter(node__cluster=c).select_related("node").order_by("node__hostname", "index")
        nodes = [(host, list(group)) for host, group in groupby(gpus, key=lambda g: g.node.hostname)]
        # then the links are the loop's, character for character
        expected = Template(_TEMPLATE_LOOP).render(Context({"nodes": nodes, "start": start, "end": end}))
        assert cluster_gpu_links(c, start, end) == expected
    assert "n0&lt;&amp;&gt;/0</a>, " in cluster_gpu_links(cluster, start, end)


def test_the_heatmap_s_figures_are_written_as_json_script_writes_them() -> None:
    grid = {"columns": ["2026-11-02T00:00:00+00:00"], "rows": [{"name": "c1 · n0</script><&>/0", "url": "/gpus/1/?a&b",
            "power_w": [75, None], "held_pct": [0.5, 100]}], "gpus": 1, "max_gpus": 128}  # fmt: skip
    assert grid_json_script(grid, "gpu-heatmap-data") == json_script(grid, "gpu-heatmap-data")
    assert "</script><" not in grid_json_script(grid, "gpu-heatmap-data").removesuffix("</script>")
