"""Waste findings from a job's per-GPU totals (pure; DESIGN section 4, "Waste").

- memory_hog: holds at least 1 GiB on a GPU with SM time under 1 % for at least 30 minutes. Its energy
  is small; its cost is the GPU it blocks, so the evidence reports the GPU-hours blocked.
- idle_allocation: occupies a whole GPU (alone on it) at under 5 % average SM for an hour or more; or,
  by its scheduler's allocation, was given more GPUs than it ever ran a process on (for an hour or more):
  the GPUs it never used, priced at its own cost and embodied carbon per GPU-hour.
A GPU that is an idle allocation is reported as that, not also as a memory hog.

- unobserved (not waste, a caveat): part of the job's GPU-hours and energy is the estimate for time it
  held its GPUs unseen (apps.telemetry.unobserved).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from apps.core.units.footprint import S_PER_HOUR, Footprint, kwh
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


@dataclass(frozen=True)
class Allocation:
    """What the job's scheduler gave it: GPUs, and for how long (seconds)."""

    gpus: int
    held_s: float


def findings(
    totals: Sequence[JobGpuTotals], t: Thresholds, allocation: Allocation | None = None
) -> dict[str, dict[str, Any]]:
    """{kind: evidence} for the job; empty for a healthy job."""
    uses = per_gpu([u for u in totals if u.source != ESTIMATED])
    unused = _unused_gpus(uses, allocation, t)
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
    if idle or unused[0]:
        out[FlagKind.IDLE_ALLOCATION] = _evidence(idle) if idle else _no_idle_gpu(uses)
    if unused[0]:
        out[FlagKind.IDLE_ALLOCATION] = _with_unused(out[FlagKind.IDLE_ALLOCATION], totals, unused)
    return out


def _no_idle_gpu(uses: Sequence[JobGpuTotals]) -> dict[str, Any]:
    """The evidence's frame where no GPU it ran on was idle (only GPUs it never ran on are)."""
    return {
        "from": min(u.first_hour for u in uses if u.first_hour).isoformat(),
        "to": max(u.last_hour for u in uses if u.last_hour).isoformat(),
        "gpus": [],
        "memory_bytes": 0,
        "sm_percent": 100.0 * sum(u.sm_s for u in uses) / max(1.0, sum(u.sampled_s for u in uses)),
        "gpu_hours_blocked": 0.0,
        "energy_kwh": 0.0,
        "facility_kwh": 0.0,
        "co2e_kg": 0.0,
        "cost": "0.00",
    }


def _unused_gpus(uses: Sequence[JobGpuTotals], allocation: Allocation | None, t: Thresholds) -> tuple[int, float]:
    """(GPUs, GPU-hours) the scheduler allocated and the job never ran a process on, where the agent watched
    it (measured on at least one GPU) for at least the idle threshold; (0, 0) otherwise."""
    if allocation is None or allocation.held_s < t.idle_min_seconds:
        return 0, 0.0
    used = {u.gpu_uuid for u in uses if u.sampled_s > 0}
    if not used or allocation.gpus <= len(used):
        return 0, 0.0
    count = allocation.gpus - len(used)
    return count, count * allocation.held_s / S_PER_HOUR


def _with_unused(evidence: dict[str, Any], totals: Sequence[JobGpuTotals], unused: tuple[int, float]) -> dict[str, Any]:
    """The idle-allocation evidence with the GPUs allocated and never used: their GPU-hours, and their cost
    and embodied carbon at the job's own rates per GPU-hour (their energy is the idle line's, not here)."""
    count, gpu_hours = unused
    whole = Footprint.total(u.footprint for u in totals)
    rate = 1.0 / whole.gpu_hours if whole.gpu_hours > 0 else 0.0
    cost = whole.cost * Decimal(gpu_hours * rate)
    embodied = whole.embodied_kg * gpu_hours * rate
    previous_cost = Decimal(evidence["cost"])
    return {
        **evidence,
        "unused_gpus": count,
        "unused_gpu_hours": gpu_hours,
        "gpu_hours_blocked": evidence["gpu_hours_blocked"] + gpu_hours,
        "co2e_kg": (evidence["co2e_kg"] or 0.0) + embodied,
        "cost": str((previous_cost + cost).quantize(Decimal("0.01"))),
    }


# Totals of the rows the scheduler's allocation added for time nobody saw (apps.jobs.models.Source).
ESTIMATED = "estimated"
UNOBSERVED_MIN_S = 60.0  # below this, a job's estimated occupancy is clock disagreement, not worth a flag
UNOBSERVED_MIN_SHARE = 0.01


def unobserved_evidence(totals: Sequence[JobGpuTotals]) -> dict[str, Any] | None:
    """How much of the job's GPU-hours and energy is the estimate for time it held its GPUs unseen; None when
    that is under a minute or 1 % of its GPU-hours."""
    estimated = [t for t in totals if t.source == ESTIMATED]
    estimated_s = sum(t.occupancy_s for t in estimated)
    all_s = sum(t.occupancy_s for t in totals)
    if estimated_s < max(UNOBSERVED_MIN_S, UNOBSERVED_MIN_SHARE * all_s):
        return None
    spent = Footprint.total(t.footprint for t in estimated)
    whole = Footprint.total(t.footprint for t in totals)
    return {
        "estimated_gpu_hours": estimated_s / S_PER_HOUR,
        "gpu_hours": all_s / S_PER_HOUR,
        "estimated_energy_kwh": kwh(spent.energy_j),
        "energy_kwh": kwh(whole.energy_j),
        "estimated_cost": str(spent.cost.quantize(Decimal("0.01"))),
        "gpus": sorted({t.gpu_uuid for t in estimated}),
    }


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
