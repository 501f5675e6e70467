"""Reads of the ingested GPU-hours."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from .models import GpuHour


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
