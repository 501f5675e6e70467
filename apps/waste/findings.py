"""Waste findings from a job's per-GPU totals (pure; DESIGN section 4, "Waste").

- memory_hog: holds at least 1 GiB on a GPU with SM time under 1 % for at least 30 minutes. Its energy
  is small; its cost is the GPU it blocks, so the evidence reports the GPU-hours blocked.
- idle_allocation: occupies a whole GPU (alone on it) at under 5 % average SM for an hour or more.
A GPU that is an idle allocation is reported as that, not also as a memory hog.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from apps.core.footprint import S_PER_HOUR, Footprint, kwh
from apps.jobs.summary import JobGpuTotals

from .kinds import FlagKind

# The kinds these findings raise (withdrawn again by the same code when their condition no longer holds).
FINDING_KINDS = (FlagKind.MEMORY_HOG, FlagKind.IDLE_ALLOCATION)


@dataclass(frozen=True)
class Thresholds:
    hog_min_memory_bytes: int = 1024**3
    hog_max_sm: float = 0.01
    hog_min_seconds: float = 1800.0
    idle_max_sm: float = 0.05
    idle_min_seconds: float = 3600.0


def per_gpu(totals: Sequence[JobGpuTotals]) -> list[JobGpuTotals]:
    """One entry per GPU (a job's hours on a GPU may come from the agent and from dcgm-exporter)."""
    merged: dict[str, JobGpuTotals] = {}
    for t in totals:
        seen = merged.get(t.gpu_uuid)
        if seen is None:
            merged[t.gpu_uuid] = t
            continue
        merged[t.gpu_uuid] = replace(
            seen,
            sampled_s=seen.sampled_s + t.sampled_s,
            sm_s=seen.sm_s + t.sm_s,
            occupancy_s=seen.occupancy_s + t.occupancy_s,
            peak_memory_bytes=max(seen.peak_memory_bytes, t.peak_memory_bytes),
            first_hour=min((h for h in (seen.first_hour, t.first_hour) if h), default=None),
            last_hour=max((h for h in (seen.last_hour, t.last_hour) if h), default=None),
            footprint=seen.footprint + t.footprint,
        )
    return list(merged.values())


def findings(totals: Sequence[JobGpuTotals], t: Thresholds) -> dict[str, dict[str, Any]]:
    """{kind: evidence} for the job; empty for a healthy job."""
    uses = per_gpu(totals)
    idle = [u for u in uses if u.alone and u.sm_fraction < t.idle_max_sm and u.sampled_s >= t.idle_min_seconds]
    idle_gpus = {u.gpu_uuid for u in idle}
    hog = [
        u
        for u in uses
        if u.gpu_uuid not in idle_gpus
        and u.peak_memory_bytes >= t.hog_min_memory_bytes
        and u.sm_fraction < t.hog_max_sm
        and u.sampled_s >= t.hog_min_seconds
    ]
    out: dict[str, dict[str, Any]] = {}
    if hog:
        out[FlagKind.MEMORY_HOG] = _evidence(hog)
    if idle:
        out[FlagKind.IDLE_ALLOCATION] = _evidence(idle)
    return out


def failed_run_evidence(
    *, state: str, exit_code: int | None, signal: int | None, job_group: str, spent: Footprint
) -> dict[str, Any]:
    """What a failed run cost: the whole run's GPU-hours, energy, CO2e and money, with the scheduler's word."""
    return {
        "state": state,
        "exit_code": exit_code,
        "signal": signal,
        "job_group": job_group,
        "gpu_hours_blocked": spent.gpu_hours,  # as the other waste kinds: the GPU time it held
        "energy_kwh": kwh(spent.energy_j),
        "facility_kwh": spent.facility_kwh,
        "co2e_kg": spent.co2e_kg,
        "cost": str(spent.cost.quantize(Decimal("0.01"))),
    }


def _evidence(uses: list[JobGpuTotals]) -> dict[str, Any]:
    spent = Footprint.total(u.footprint for u in uses)
    return {
        "from": min(u.first_hour for u in uses if u.first_hour).isoformat(),
        "to": max(u.last_hour for u in uses if u.last_hour).isoformat(),
        "gpus": sorted(u.gpu_uuid for u in uses),
        "memory_bytes": max(u.peak_memory_bytes for u in uses),
        "sm_percent": 100.0 * sum(u.sm_s for u in uses) / max(1.0, sum(u.sampled_s for u in uses)),
        "gpu_hours_blocked": sum(u.occupancy_s for u in uses) / S_PER_HOUR,
        "energy_kwh": kwh(spent.energy_j),
        "facility_kwh": spent.facility_kwh,
        "co2e_kg": spent.co2e_kg,
        "cost": str(spent.cost.quantize(Decimal("0.01"))),
    }
