"""Waste findings from a job's per-GPU totals (pure; DESIGN section 4, "Waste").

- memory_hog: holds at least 1 GiB on a GPU with SM time under 1 % for at least 30 minutes. Its energy
  is small; its cost is the GPU it blocks, so the evidence reports the GPU-hours blocked.
- idle_allocation: occupies a whole GPU (alone on it) at under 5 % average SM for an hour or more.
A GPU that is an idle allocation is reported as that, not also as a memory hog.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal


@dataclass(frozen=True)
class Thresholds:
    hog_min_memory_bytes: int = 1024**3
    hog_max_sm: float = 0.01
    hog_min_seconds: float = 1800.0
    idle_max_sm: float = 0.05
    idle_min_seconds: float = 3600.0


@dataclass(frozen=True)
class JobGpuUse:
    """One job on one GPU, over all its ingested hours."""

    gpu_uuid: str
    first_hour: datetime
    last_hour: datetime
    sampled_s: float
    sm_s: float
    occupancy_s: float
    peak_memory_bytes: int
    energy_j: float
    facility_kwh: float
    co2e_kg: float
    cost: Decimal

    @property
    def sm_fraction(self) -> float:
        return self.sm_s / self.sampled_s if self.sampled_s else 0.0

    @property
    def alone(self) -> bool:
        """Whole GPU: charged (almost) every second it was seen, so nothing shared it."""
        return self.sampled_s > 0 and self.occupancy_s >= 0.99 * self.sampled_s


def findings(uses: list[JobGpuUse], t: Thresholds) -> dict[str, dict]:
    """{kind: evidence} for the job; empty for a healthy job."""
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
    out = {}
    if hog:
        out["memory_hog"] = _evidence(hog)
    if idle:
        out["idle_allocation"] = _evidence(idle)
    return out


def _evidence(uses: list[JobGpuUse]) -> dict:
    return {
        "from": min(u.first_hour for u in uses).isoformat(),
        "to": max(u.last_hour for u in uses).isoformat(),
        "gpus": sorted(u.gpu_uuid for u in uses),
        "memory_bytes": max(u.peak_memory_bytes for u in uses),
        "sm_percent": 100.0 * sum(u.sm_s for u in uses) / max(1.0, sum(u.sampled_s for u in uses)),
        "gpu_hours_blocked": sum(u.occupancy_s for u in uses) / 3600.0,
        "energy_kwh": sum(u.energy_j for u in uses) / 3.6e6,
        "facility_kwh": sum(u.facility_kwh for u in uses),
        "co2e_kg": sum(u.co2e_kg for u in uses),
        "cost": str(sum((u.cost for u in uses), Decimal(0)).quantize(Decimal("0.01"))),
    }
