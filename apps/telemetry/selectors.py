"""Reads of the ingested GPU-hours."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.db.models import Max

from .models import GpuHour, IngestedHour


def gpu_sampled_seconds(*, spans: Mapping[int, tuple[datetime, datetime]]) -> dict[tuple[int, datetime], float]:
    """The agent's sampled seconds of every GPU-hour the spans touch, per (GPU, hour)."""
    if not spans:
        return {}
    lo = min(a for a, _ in spans.values()).replace(minute=0, second=0, microsecond=0)
    hi = max(b for _, b in spans.values())
    rows = GpuHour.objects.filter(gpu_id__in=list(spans), hour__gte=lo, hour__lte=hi).values_list(
        "gpu_id", "hour", "sampled_s"
    )
    return {(gpu_id, hour): sampled for gpu_id, hour, sampled in rows}


def clusters_ingested_through(*, cluster_ids: Iterable[int]) -> dict[int, datetime]:
    """Per cluster, the end of the latest hour ingested."""
    rows = (
        IngestedHour.objects.filter(cluster_id__in=sorted(set(cluster_ids)))
        .values("cluster_id")
        .annotate(latest=Max("hour"))
        .order_by()
    )
    return {r["cluster_id"]: r["latest"] + timedelta(hours=1) for r in rows}
