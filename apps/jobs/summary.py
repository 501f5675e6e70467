"""A job's summary from its hour rows (pure): energy, split, coverage, occupancy, start and end."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from apps.core.units.footprint import S_PER_HOUR, Footprint

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class JobGpuTotals:
    """One job's rows on one GPU, summed over all its ingested hours: the one per-job aggregate that
    every step after the ingest reads (summary, footprint sums, findings)."""

    gpu_id: int
    source: str = "agent"
    sampled_s: float = 0.0
    sm_s: float = 0.0
    occupancy_s: float = 0.0
    peak_memory_bytes: int = 0
    job_start: datetime | None = None
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    gpu_uuid: str = ""
    first_hour: datetime | None = None
    last_hour: datetime | None = None
    footprint: Footprint = field(default_factory=Footprint)  # the rows' energy, GPU-hours, kWh, kg, cost
    intensity_estimated: bool = False  # some hour's intensity was filled in

    @property
    def sm_fraction(self) -> float:
        """SM-busy seconds per sampled second."""
        return self.sm_s / self.sampled_s if self.sampled_s else 0.0

    @property
    def alone(self) -> bool:
        """Whole GPU: charged (almost) every second it was seen, so nothing shared it."""
        return self.sampled_s > 0 and self.occupancy_s >= 0.99 * self.sampled_s


@dataclass
class JobSummary:
    energy_j: float = 0.0
    attribution: str = ""
    attribution_j: dict[str, float] = field(default_factory=dict)
    sampled_s: float = 0.0
    expected_s: float = 0.0
    coverage: float = 0.0
    gpu_hours: float = 0.0
    sm_s: float = 0.0
    peak_memory_bytes: int = 0
    gpu_count: int = 0
    start: datetime | None = None
    last_seen: datetime | None = None
    end: datetime | None = None
    first_day: date | None = None  # the UTC days of its first and last hour rows
    last_day: date | None = None


def agent_spans(totals: Iterable[Iterable[JobGpuTotals]]) -> dict[int, tuple[datetime, datetime]]:
    """Per GPU, from the earliest start of the jobs on it to their last sample there, where the agent saw
    them: the GPU-hours whose sampled seconds the jobs' coverage needs."""
    spans: dict[int, tuple[datetime, datetime]] = {}
    for job in totals:
        gpus = list(job)
        starts = [g.job_start for g in gpus if g.job_start]
        for g in gpus:
            if g.source != "agent" or not starts or g.last_seen is None:
                continue
            a, b = spans.get(g.gpu_id, (min(starts), g.last_seen))
            spans[g.gpu_id] = (min(a, min(starts)), max(b, g.last_seen))
    return spans


def unobserved_s(
    *, gpu_id: int, start: datetime, end: datetime, gpu_sampled: Mapping[tuple[int, datetime], float]
) -> float:
    """Seconds of [start, end) the agent did not watch on the GPU, from its per GPU-hour sampled seconds
    (an hour with no record was not watched at all). Exact for hours the span covers whole; in the
    span's first and last hour only what cannot have been watched counts (overlap - watched), since the
    hour's watched seconds may all lie inside the span: a lower bound there."""
    missed = 0.0
    hour = start.replace(minute=0, second=0, microsecond=0)
    while hour < end:
        overlap = (min(hour + HOUR, end) - max(hour, start)).total_seconds()
        watched = min(3600.0, gpu_sampled.get((gpu_id, hour), 0.0))
        missed += max(0.0, overlap - watched)
        hour += HOUR
    return missed


@dataclass(frozen=True)
class SchedulerSpan:
    """When a job's scheduler says it held its GPUs, and how many (DESIGN section 8)."""

    start: datetime
    end: datetime | None  # None: it still held them when the record was read
    seen_at: datetime | None  # when the record was read
    gpus: int  # GPUs allocated; 0: not recorded

    def held_until(self, ingested_through: datetime | None) -> datetime | None:
        """The end of the span as far as the hours ingested go."""
        until = self.end or self.seen_at
        if until is None:
            return ingested_through
        return min(until, ingested_through) if ingested_through else until


def job_summarize(
    *,
    gpus: Iterable[JobGpuTotals],
    energy_by_method: dict[str, float],
    scrape_interval_s: float,
    ingested_through: datetime | None,
    gpu_sampled: Mapping[tuple[int, datetime], float] | None = None,
    scheduler: SchedulerSpan | None = None,
) -> JobSummary:
    """Coverage = sampled GPU-seconds / expected GPU-seconds, never above 1.

    Where the scheduler recorded the job's span, it is the truth: expected = its GPUs (allocated, else
    those measured) x the span, as far as the ingest has gone, so an agent that died before the job ended
    shows; start and end are the scheduler's. Without a record, with the agent, expected on each GPU is
    what it sampled plus what it did not watch between the job's start and its last sample there
    (outages, restarts): a job that had not reached the GPU yet while the agent watched is not "unseen".
    With dcgm-exporter only, expected runs from the first sample to the last. `end` is then the last
    sample once the ingest has gone a couple of scrapes past it without seeing the job again; before that
    the job may still be running and has no end.
    """
    gpus = list(gpus)
    s = JobSummary()
    if scheduler is not None and not gpus:
        # On GPUs fleetwatt knows nothing of (no agent, no dcgm-exporter, or GPUs it cannot tell apart): its
        # GPU-hours are the allocation's; with no GPU to price, no cost or carbon (docs/arithmetic.md).
        _scheduler_span_apply(s, scheduler, ingested_through)
        s.gpu_count = scheduler.gpus
        s.gpu_hours = s.expected_s / S_PER_HOUR  # allocated GPUs x the span, as far as the ingest has gone
    s.attribution_j = {m: j for m, j in sorted(energy_by_method.items()) if j > 0}
    s.energy_j = sum(s.attribution_j.values())
    if s.attribution_j:
        s.attribution = max(s.attribution_j.items(), key=lambda kv: kv[1])[0]
    if not gpus:
        return s
    starts = [g.job_start for g in gpus if g.job_start] or [g.first_seen for g in gpus if g.first_seen]
    s.start = min(starts) if starts else None
    seen = [g.last_seen for g in gpus if g.last_seen]
    s.last_seen = max(seen) if seen else None
    hours = [h for g in gpus for h in (g.first_hour, g.last_hour) if h is not None]
    if hours:
        s.first_day, s.last_day = min(hours).astimezone(UTC).date(), max(hours).astimezone(UTC).date()
    for g in gpus:
        s.sampled_s += g.sampled_s
        s.sm_s += g.sm_s
        s.gpu_hours += g.occupancy_s / S_PER_HOUR
        s.peak_memory_bytes = max(s.peak_memory_bytes, g.peak_memory_bytes)
        if g.last_seen is None:
            continue
        if g.source == "agent" and s.start is not None:
            missed = unobserved_s(gpu_id=g.gpu_id, start=s.start, end=g.last_seen, gpu_sampled=gpu_sampled or {})
            s.expected_s += g.sampled_s + missed
        elif g.first_seen is not None:
            s.expected_s += (g.last_seen - g.first_seen).total_seconds()
    s.gpu_count = len({g.gpu_id for g in gpus})  # a GPU seen by the agent and by dcgm-exporter counts once
    if scheduler is not None:
        _scheduler_span_apply(s, scheduler, ingested_through)
        return s
    if s.expected_s > 0:
        s.coverage = min(1.0, s.sampled_s / s.expected_s)
    elif s.sampled_s > 0:
        s.coverage = 1.0
    if (
        s.last_seen is not None
        and ingested_through is not None
        and s.last_seen < ingested_through - timedelta(seconds=2 * scrape_interval_s)
    ):
        s.end = s.last_seen
    return s


def _scheduler_span_apply(s: JobSummary, span: SchedulerSpan, ingested_through: datetime | None) -> None:
    """Start, end and coverage's denominator from the scheduler's span (in place)."""
    s.start, s.end = span.start, span.end
    if span.end is not None:
        s.last_seen = max(s.last_seen, span.end) if s.last_seen else span.end
    until = span.held_until(ingested_through)
    held_s = max(0.0, (until - span.start).total_seconds()) if until else 0.0
    # The GPUs it was measured on (an allocated GPU it never used is an idle allocation, not unseen time),
    # else those allocated.
    s.expected_s = (s.gpu_count or span.gpus) * held_s
    if s.expected_s > 0:
        s.coverage = min(1.0, s.sampled_s / s.expected_s)
    else:
        s.coverage = 1.0 if s.sampled_s > 0 else 0.0
