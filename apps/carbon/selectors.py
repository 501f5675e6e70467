"""Reads of the carbon app's inputs: which clusters' footprints an input reaches."""

from __future__ import annotations

from collections.abc import Collection

from apps.fleet.models import Cluster, Gpu, Node
from apps.jobs.models import Job


def clusters_affected(
    *,
    site_ids: Collection[int] = (),
    server_type_ids: Collection[int] = (),
    gpu_model_names: Collection[str] = (),
    job_group_ids: Collection[int] = (),
) -> set[int]:
    """The clusters whose footprints depend on these inputs."""
    ids: set[int] = set()
    if site_ids:
        ids |= set(Cluster.objects.filter(site_id__in=site_ids).values_list("id", flat=True))
    if server_type_ids:
        ids |= set(Node.objects.filter(server_type_id__in=server_type_ids).values_list("cluster_id", flat=True))
    if gpu_model_names:
        ids |= set(Gpu.objects.filter(model_name__in=gpu_model_names).values_list("node__cluster_id", flat=True))
    if job_group_ids:  # a group's `flexible` decides whether its jobs get the carbon hint
        ids |= set(Job.objects.filter(job_group_id__in=job_group_ids).values_list("cluster_id", flat=True))
    return ids
