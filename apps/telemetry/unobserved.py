"""What the scheduler's allocation adds to a GPU-hour that nobody fully saw (pure; DESIGN section 8).

A job holds its GPUs for the span its scheduler records, but it is measured only while the agent (or a
dcgm-exporter job label) sees it. For each GPU-hour and each job the scheduler says held the GPU in it:

- its *claim* is the time it held the GPU and was not seen on it: held seconds less its sampled seconds;
- the claims share the part of the hour no seen job occupied (the unseen seconds, then the seen-idle
  ones): scaled down together where they ask for more, so a GPU-hour is never charged twice;
- the claimed time is the job's estimated occupancy (GPU-hours: cost, embodied carbon);
- the GPU-hour's unobserved energy (DCGM's meter less the agent's) goes to the claims: all of it where
  they fill the unseen time; where they cover only part of it, what the jobs draw when seen (their measured
  energy per occupied second) over their unseen part, at most the meter's, or a share by time where a job
  was never seen drawing power. Between the jobs it is split by their seen power x claimed time (a job
  alone takes it whole). The rest stays the GPU-hour's unobserved remainder.

A job no scheduler record describes is held, on a GPU, from the first to the last time the agent saw it there,
where every sighting reports the same start (one run, not a key used again): a gap the agent saw it on both
sides of is charged to it the same way (`agent_span`), from the time nobody saw only (`bridged_gap`): the
agent saw the rest of the hour, and it was not the job's.

Claims under `MIN_CLAIM_S` are left out: the scheduler's and the agent's clocks and the moment a job's first
process appears disagree by seconds, and those are not time anybody missed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

HOUR_S = 3600.0
MIN_CLAIM_S = 18.0  # 0.5 % of an hour


@dataclass(frozen=True)
class GpuHourGap:
    """What a GPU-hour left to the scheduler: time no seen job occupied, and the energy nobody saw."""

    unoccupied_s: float  # the hour less the seen jobs' occupancy (seen-idle + unseen)
    unseen_s: float  # seconds nobody saw
    unobserved_j: float  # their energy by DCGM's meter (0 where nothing measured it)

    @classmethod
    def unmeasured(cls) -> GpuHourGap:
        """An ingested hour with no record of the GPU at all: neither the agent nor DCGM saw it."""
        return cls(unoccupied_s=HOUR_S, unseen_s=HOUR_S, unobserved_j=0.0)


@dataclass(frozen=True)
class SeenPart:
    """A job's measured row on the GPU in the hour."""

    sampled_s: float
    occupancy_s: float
    energy_j: float


@dataclass(frozen=True)
class Estimate:
    job_id: int
    occupancy_s: float
    energy_j: float


def held_seconds(*, start: datetime, end: datetime, hour: datetime) -> float:
    """Seconds of the hour [hour, hour + 1 h) inside [start, end)."""
    first, last = max(start, hour), min(end, hour + timedelta(hours=1))
    return max(0.0, (last - first).total_seconds())


def gap_estimates(
    *,
    gap: GpuHourGap,
    held_s: Mapping[int, float],
    seen: Mapping[int, SeenPart],
    seen_power_w: Mapping[int, float] | None = None,
) -> list[Estimate]:
    """The estimates of one GPU-hour: per job the scheduler says held it (`held_s`: job -> seconds held in
    the hour), its estimated occupancy and energy. `seen`: the jobs' measured rows in the GPU-hour;
    `seen_power_w`: each job's power over all its measured rows, for a job not seen in this hour."""
    claims = {}
    for job_id in sorted(held_s):
        part = seen.get(job_id)
        claim = held_s[job_id] - (part.sampled_s if part else 0.0)
        if claim >= MIN_CLAIM_S:
            claims[job_id] = claim
    asked = sum(claims.values())
    if asked <= 0 or gap.unoccupied_s <= 0:
        return []
    scale = min(1.0, gap.unoccupied_s / asked)
    occupancy = {job_id: claim * scale for job_id, claim in claims.items()}
    granted = sum(occupancy.values())
    power = _seen_power(occupancy, seen, seen_power_w or {})
    unseen_share = min(1.0, gap.unseen_s / granted) if granted > 0 else 0.0  # of the claims, the unseen part
    if gap.unseen_s <= 0 or gap.unobserved_j <= 0:
        energy_total = 0.0
    elif granted >= gap.unseen_s or power is None:
        # The claims fill the unseen time (the meter's part is theirs), or nothing says what they drew: by time.
        energy_total = gap.unobserved_j * min(1.0, granted / gap.unseen_s)
    else:
        # Part of the unseen time was nobody's: the jobs take what they draw when seen, the rest stays.
        energy_total = min(gap.unobserved_j, unseen_share * sum(power[j] * occupancy[j] for j in occupancy))
    weights = {j: occupancy[j] * power[j] for j in occupancy} if power else dict(occupancy)
    weight_sum = sum(weights.values())
    return [
        Estimate(
            job_id=job_id,
            occupancy_s=occupancy[job_id],
            energy_j=energy_total * weights[job_id] / weight_sum if weight_sum > 0 else 0.0,
        )
        for job_id in sorted(occupancy)
    ]


def _seen_power(
    occupancy: Mapping[int, float], seen: Mapping[int, SeenPart], seen_power_w: Mapping[int, float]
) -> dict[int, float] | None:
    """Each claiming job's power when seen: on this GPU-hour, else over all its measured rows; None where a
    claiming job was never seen drawing power."""
    power = {}
    for job_id in occupancy:
        part = seen.get(job_id)
        # A second at least: the agent samples once a second, and a sliver of occupancy (float noise) would
        # make the power infinite.
        if part is not None and part.occupancy_s >= 1.0 and part.energy_j > 0:
            power[job_id] = part.energy_j / part.occupancy_s
        elif seen_power_w.get(job_id, 0.0) > 0:
            power[job_id] = seen_power_w[job_id]
        else:
            return None
    return power


@dataclass(frozen=True)
class Sighting:
    """One measured row of a job on a GPU: the hour, when the agent saw it in it, and the start it reported."""

    hour: datetime
    first_seen: datetime | None
    last_seen: datetime | None
    job_start: datetime | None

    @property
    def seen_from(self) -> datetime:
        """The row's first sighting; the agent reports none, only the job's start: the later of it and the hour."""
        if self.first_seen is not None:
            return self.first_seen
        return max(self.hour, self.job_start) if self.job_start is not None else self.hour


def agent_span(sightings: Sequence[Sighting]) -> tuple[datetime, datetime] | None:
    """The span a job held a GPU by the agent's sightings alone: from its first to its last, where they report
    one start (or none); None where they report two (the same key for another run) or say no time."""
    starts = {s.job_start for s in sightings if s.job_start is not None}
    lasts = [s.last_seen for s in sightings if s.last_seen is not None]
    if len(starts) > 1 or not sightings or not lasts:
        return None
    first, last = min(s.seen_from for s in sightings), max(lasts)
    return (first, last) if last > first else None


def bridged_gap(gap: GpuHourGap) -> GpuHourGap:
    """A GPU-hour's gap as a job held only by the agent's sightings may claim it: the unseen seconds only."""
    return GpuHourGap(
        unoccupied_s=min(gap.unoccupied_s, gap.unseen_s), unseen_s=gap.unseen_s, unobserved_j=gap.unobserved_j
    )


def gap_totals(estimates: Sequence[Estimate]) -> tuple[float, float]:
    """(seconds, joules) charged by a GPU-hour's estimates."""
    return sum(e.occupancy_s for e in estimates), sum(e.energy_j for e in estimates)
