"""Never delete what the source forgot (pure): whether replacing a stored hour by the source's answer now
would lose data, because the source no longer holds the hour (retention) or holds far less of it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from apps.core.units.footprint import kwh

from .hour import HourResult
from .work import WorkRow

_UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_DURATION = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_DURATIONS = re.compile(r"(?:\d+(?:ms|y|w|d|h|m|s))+")


@dataclass(frozen=True)
class HourTotals:
    """How much of a cluster-hour there is: its GPUs, job rows and the GPUs' energy."""

    gpus: frozenset[str] = frozenset()  # UUIDs of the GPUs with a GPU-hour
    job_rows: int = 0
    device_energy_j: float = 0.0
    work_rows: int = 0  # the serving engines' and jobs' work rows (apps.telemetry.work)

    @property
    def gpu_hours(self) -> int:
        return len(self.gpus)

    @property
    def empty(self) -> bool:
        return not self.gpus and self.job_rows == 0


def fresh_hour_totals(result: HourResult, work: Sequence[WorkRow] = ()) -> HourTotals:
    """What the source answered for the hour, counted as stored_hour_totals counts (the work rows, before those
    of jobs the cluster does not have are left out: at most what is stored)."""
    return HourTotals(
        gpus=frozenset(g.uuid for g in result.gpu_hours),
        job_rows=len(result.job_hours),
        device_energy_j=sum(g.device_energy_j for g in result.gpu_hours),
        work_rows=len(work),
    )


def retention_parse(text: str) -> timedelta | None:
    """A Prometheus retention as its runtime info says it ("15d", "1y2w", "30d or 512MiB"): the time part,
    None when there is none or it is 0 (no time limit)."""
    head = text.split(" or ")[0].replace(" ", "")
    if not _DURATIONS.fullmatch(head):
        return None
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(head))
    return timedelta(seconds=seconds) if seconds > 0 else None


def beyond_retention(*, hour: datetime, now: datetime, retention: timedelta | None) -> bool:
    """Whether the source may already have deleted the hour (its start is older than the retention)."""
    return retention is not None and hour < now - retention


def source_loss(*, stored: HourTotals, fresh: HourTotals, beyond: bool, min_ratio: float) -> str | None:
    """Why replacing `stored` by `fresh` would lose data, or None when it is safe: nothing is stored, or the
    source still holds the hour, every GPU stored for it, and at least `min_ratio` of the stored energy.
    (The same data gives the same answer to the joule: a source that gives less has lost something.)"""
    if stored.empty:
        return None
    if beyond:
        return "the hour is older than the source's retention: the stored rows may be the only copy"
    if not fresh.gpus and stored.gpus:
        return f"the source now gives 0 GPU-hours where {stored.gpu_hours} are stored"
    if missing := sorted(stored.gpus - fresh.gpus):
        return (
            f"the source no longer gives {len(missing)} of the {stored.gpu_hours} GPU-hours stored "
            f"(e.g. {missing[0]}): a node or exporter it lost"
        )
    if fresh.device_energy_j < min_ratio * stored.device_energy_j:
        return (
            f"the source now gives {kwh(fresh.device_energy_j):.2f} kWh of GPU energy "
            f"where {kwh(stored.device_energy_j):.2f} kWh are stored"
        )
    if fresh.work_rows < min_ratio * stored.work_rows:
        return f"the source now gives {fresh.work_rows} rows of served work where {stored.work_rows} are stored"
    return None
