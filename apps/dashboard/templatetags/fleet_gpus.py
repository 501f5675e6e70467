"""The fleet page's list of a cluster's GPUs, each linked to its page (admins and finance): one query a cluster."""

from __future__ import annotations

from itertools import groupby

from django import template

from apps.fleet.models import Cluster, Gpu

register = template.Library()


@register.simple_tag
def cluster_gpus(cluster: Cluster) -> list[tuple[str, list[Gpu]]]:
    """[(hostname, [its GPUs by index])], nodes by hostname."""
    gpus = Gpu.objects.filter(node__cluster=cluster).select_related("node").order_by("node__hostname", "index")
    return [(host, list(group)) for host, group in groupby(gpus, key=lambda g: g.node.hostname)]
