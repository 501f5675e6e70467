"""Writes of the carbon and cost footprint: per job-GPU-hour rows, the idle line per GPU-hour, and
the per-job sums. Recomputed after each ingest and whenever an input (config, intensity) changes."""
from __future__ import annotations

from datetime import datetime


def footprints_refresh(
    *, cluster_ids: list[int] | None = None, start: datetime | None = None, end: datetime | None = None
) -> int:
    """Recompute the footprint of every GPU-hour in [start, end) of the given clusters (default: all).
    Returns the number of GPU-hours recomputed."""
    raise NotImplementedError


def job_groups_assign(*, cluster_ids: list[int] | None = None) -> int:
    """Set each job's group from the job groups' match rules. Returns the number of jobs changed."""
    raise NotImplementedError
