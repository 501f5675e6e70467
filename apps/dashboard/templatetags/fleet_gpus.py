"""The fleet page's GPUs: the list of a cluster's GPUs, each linked to its page (admins and finance), in one query a
cluster; and the heatmap's GPU that drew the most."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from django import template

from apps.fleet.models import Cluster, Gpu

register = template.Library()


@register.simple_tag
def cluster_gpus(cluster: Cluster) -> list[tuple[str, list[Gpu]]]:
    """[(hostname, [its GPUs by index])], nodes by hostname."""
    gpus = Gpu.objects.filter(node__cluster=cluster).select_related("node").order_by("node__hostname", "index")
    return [(host, list(group)) for host, group in groupby(gpus, key=lambda g: g.node.hostname)]


@register.simple_tag
def hottest_gpu(grid: dict[str, Any] | None) -> dict[str, Any] | None:
    """The heatmap's row (apps.dashboard.heatmap) with the highest mean power over its hours ingested, with that
    mean (`power_w`) and those hours (`hours`); None where the grid holds only the least-drawing GPUs (capped) or
    no hour."""
    if not grid or grid["gpus"] > len(grid["rows"]):
        return None
    best: dict[str, Any] | None = None
    for row in grid["rows"]:
        cells = [(w, h) for w, h in zip(row["power_w"], row["hours"], strict=True) if w is not None]
        hours = sum(h for _, h in cells)
        if not hours:
            continue
        mean_w = sum(w * h for w, h in cells) / hours
        if best is None or mean_w > best["power_w"]:
            best = {"name": row["name"], "url": row["url"], "power_w": mean_w, "hours": hours}
    return best
