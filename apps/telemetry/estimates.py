"""Time nobody saw: the scheduler's allocation applied to the GPU-hours (DESIGN section 8). The estimates of a
window of a cluster's ingested hours derived again (the arithmetic: apps.telemetry.unobserved): the derivation's
step `unobserved_estimates` (apps.pipeline.derive)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from apps.core.db.bulk import rows_update
from apps.core.units.aggregates import exact_sum
from apps.fleet.models import Cluster, Gpu
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy, Source

from .models import GpuHour, IngestedHour
from .services import HOUR, cluster_write_lock, hours_between
from .unobserved import (
    MIN_CLAIM_S,
    GpuHourGap,
    SeenPart,
    Sighting,
    agent_span,
    bridged_gap,
    gap_estimates,
    gap_totals,
    held_seconds,
)


@dataclass(frozen=True)
class EstimatesRefresh:
    """What re-deriving a window's estimates touched."""

    job_ids: set[int]  # jobs with an estimate in the window, before or after
    rows: int  # estimated job-GPU-hour rows written
    start: datetime  # where the window began: earlier than asked where its sightings closed a gap before it


def _held_gpus(cluster: Cluster, jobs: list[Job]) -> dict[int, set[int]]:
    """Which of the cluster's GPUs each scheduler job held: those it was measured on (any hour), with its
    allocation's GPU indices per node where recorded, or every GPU of its nodes where its GPU count is
    theirs (a whole-node allocation). Otherwise only those measured, or none (docs/arithmetic.md)."""
    measured: dict[int, set[int]] = {}
    for job_id, gpu_id in (
        JobGpuHour.objects.filter(job_id__any=[j.pk for j in jobs])
        .exclude(source=Source.ESTIMATED)
        .values_list("job_id", "gpu_id")
        .distinct()
        .order_by()
    ):
        measured.setdefault(job_id, set()).add(gpu_id)
    by_node: dict[str, dict[int, int]] = {}
    for gpu_id, hostname, index in Gpu.objects.filter(node__cluster=cluster).values_list(
        "pk", "node__hostname", "index"
    ):
        by_node.setdefault(hostname, {})[index] = gpu_id
    held: dict[int, set[int]] = {}
    for job in jobs:
        gpus = set(measured.get(job.pk, set()))
        indices = job.gpu_indices if isinstance(job.gpu_indices, dict) else {}
        nodes = [n for n in job.node_list.split(",") if n]
        whole_nodes = bool(job.gpus_allocated) and job.gpus_allocated == sum(len(by_node.get(n, {})) for n in nodes)
        for node in nodes:
            on_node = by_node.get(node, {})
            if indices.get(node):
                gpus |= {on_node[i] for i in indices[node] if i in on_node}
            elif whole_nodes:
                gpus |= set(on_node.values())
        if gpus:
            held[job.pk] = gpus
    return held


# How far from a window the agent's sightings of a job are read: a gap longer than this is not bridged.
BRIDGE_LOOKBACK = timedelta(hours=6)


def _agent_sightings(
    cluster: Cluster, start: datetime, end: datetime
) -> dict[tuple[int, int], list[tuple[datetime, Sighting]]]:
    """The agent's rows near [start, end) of the jobs no scheduler record describes, per (job, GPU), by hour: of
    the GPUs with time nobody saw near it only (none, most hours: one cheap query)."""
    near = {"hour__gte": start - BRIDGE_LOOKBACK, "hour__lt": end + BRIDGE_LOOKBACK}
    gaps = GpuHour.objects.filter(gpu__node__cluster=cluster, unobserved_s__gte=MIN_CLAIM_S, **near)
    gpu_ids = sorted(set(gaps.values_list("gpu_id", flat=True).distinct()))
    out: dict[tuple[int, int], list[tuple[datetime, Sighting]]] = {}
    if not gpu_ids:
        return out
    for job_id, gpu_id, hour, first_seen, last_seen, job_start in (
        JobGpuHour.objects.filter(gpu_id__in=gpu_ids, source=Source.AGENT, job__scheduler_start__isnull=True, **near)
        .values_list("job_id", "gpu_id", "hour", "first_seen", "last_seen", "job_start")
        .order_by("hour")
    ):
        out.setdefault((job_id, gpu_id), []).append((hour, Sighting(hour, first_seen, last_seen, job_start)))
    return out


def _bridge_start(sightings: Mapping[tuple[int, int], list[tuple[datetime, Sighting]]], start: datetime) -> datetime:
    """Where a window's re-derivation must begin so that a gap its new sightings close is charged: the hour of
    a job's sighting before the window, where the agent then lost it (a missing hour, or an hour it was not
    seen to the end of)."""
    first = start
    for rows in sightings.values():
        before = [(hour, s) for hour, s in rows if hour < start]
        if not before or not any(hour >= start for hour, _ in rows):
            continue
        hour, last = before[-1]
        lost = hour + HOUR < start or (
            last.last_seen is not None and (hour + HOUR - last.last_seen).total_seconds() >= MIN_CLAIM_S
        )
        if lost:
            first = min(first, hour)
    return first


# (GPU id, hour) -> job id -> the seconds the job held the GPU in the hour.
Holds = dict[tuple[int, datetime], dict[int, float]]


def unobserved_estimates_refresh(
    *, cluster: Cluster, start: datetime, end: datetime, writing: bool = False
) -> EstimatesRefresh:
    """Re-derive the estimates of the cluster's ingested hours in [start, end) (apps.telemetry.unobserved):
    the estimated job-GPU-hour rows and their `estimated` energy, and each GPU-hour's estimated_j/_s.
    Replaces what was there; the same inputs give the same rows. `writing`: [start, end) are the hours an ingest
    is writing (their rows are there, their record not yet). Where the window's sightings close a gap the agent
    lost a job in before it, the window reaches back to that gap (`EstimatesRefresh.start`)."""
    cluster_write_lock(cluster=cluster)
    sightings = _agent_sightings(cluster, start, end)
    written = set(hours_between(start, end)) if writing else set()
    start = _bridge_start(sightings, start)
    hours = sorted(
        written
        | set(
            IngestedHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end).values_list("hour", flat=True)
        )
    )
    touched = _estimates_clear(cluster, start, end)
    if not hours:
        return EstimatesRefresh(job_ids=touched, rows=0, start=start)
    holders = _holders(cluster, first=hours[0], last=hours[-1] + HOUR)
    held = _scheduler_holds(cluster, holders, hours)
    bridged = _agent_holds(sightings, hours, held=held)
    if not held and not bridged:  # most hours of a cluster whose scheduler is not read and whose agents saw all
        return EstimatesRefresh(job_ids=touched, rows=0, start=start)
    gpu_ids = {gpu_id for gpu_id, _ in held} | {gpu_id for gpu_id, _ in bridged}
    gaps = _gap_records(gpu_ids, hours)
    seen = _seen_parts(gpu_ids, hours)
    claimants = {j.pk for j in holders} | {job_id for holds in bridged.values() for job_id in holds}
    rows, energy_rows, gpu_hours = _estimate_rows(
        held, bridged, gaps=gaps, seen=seen, seen_power_w=_seen_power_w(claimants)
    )
    JobGpuHour.objects.bulk_create(rows, batch_size=2000)
    JobGpuHourEnergy.objects.bulk_create(energy_rows, batch_size=2000)
    rows_update(gpu_hours, ["estimated_s", "estimated_j"])
    return EstimatesRefresh(job_ids=touched | {r.job_id for r in rows}, rows=len(rows), start=start)


def _estimates_clear(cluster: Cluster, start: datetime, end: datetime) -> set[int]:
    """Delete the cluster's estimated rows in [start, end) and zero its GPU-hours' estimates. Returns the jobs
    that had an estimate there."""
    in_cluster = {"gpu__node__cluster": cluster}
    old_rows = JobGpuHour.objects.filter(**in_cluster, hour__gte=start, hour__lt=end, source=Source.ESTIMATED)
    touched = set(old_rows.values_list("job_id", flat=True))
    if touched:  # estimated energy rows are written and deleted with their estimated rows: none without them
        JobGpuHourEnergy.objects.filter(
            **in_cluster, hour__gte=start, hour__lt=end, method=Method.ESTIMATED, job_id__any=sorted(touched)
        ).delete()
        old_rows.delete()
    GpuHour.objects.filter(**in_cluster, hour__gte=start, hour__lt=end).exclude(estimated_j=0, estimated_s=0).update(
        estimated_j=0.0, estimated_s=0.0
    )
    return touched


def _holders(cluster: Cluster, *, first: datetime, last: datetime) -> list[Job]:
    """The cluster's jobs whose scheduler record says they held GPUs in [first, last) (running: up to when the
    scheduler last saw them)."""
    return list(
        Job.objects.filter(cluster=cluster, scheduler_start__lt=last)
        .filter(Q(scheduler_end__gt=first) | Q(scheduler_end__isnull=True, scheduler_seen_at__gt=first))
        .only(
            "pk", "scheduler_start", "scheduler_end", "scheduler_seen_at", "gpu_indices", "node_list", "gpus_allocated"
        )
    )


def _scheduler_holds(cluster: Cluster, holders: list[Job], hours: list[datetime]) -> Holds:
    """The seconds each scheduler job held each of its GPUs in each hour."""
    held_gpus = _held_gpus(cluster, holders) if holders else {}
    held: Holds = {}
    for job in holders:
        until = job.scheduler_end or job.scheduler_seen_at
        if job.pk not in held_gpus or job.scheduler_start is None or until is None:
            continue
        for hour in hours:
            seconds = held_seconds(start=job.scheduler_start, end=until, hour=hour)
            if seconds > 0:
                for gpu_id in held_gpus[job.pk]:
                    held.setdefault((gpu_id, hour), {})[job.pk] = seconds
    return held


def _agent_holds(
    sightings: Mapping[tuple[int, int], list[tuple[datetime, Sighting]]], hours: list[datetime], *, held: Holds
) -> Holds:
    """The agent's own word where no scheduler's is: a job seen on a GPU before and after a gap held it between
    (the GPU-hours a scheduler job holds left out)."""
    bridged: Holds = {}
    for (job_id, gpu_id), by_hour in sightings.items():
        span = agent_span([sighting for _, sighting in by_hour])
        if span is None:
            continue
        for hour in hours:
            seconds = held_seconds(start=span[0], end=span[1], hour=hour)
            if seconds > 0 and (gpu_id, hour) not in held:
                bridged.setdefault((gpu_id, hour), {})[job_id] = seconds
    return bridged


def _gap_records(gpu_ids: set[int], hours: list[datetime]) -> dict[tuple[int, datetime], GpuHour]:
    """The GPU-hours of these GPUs and hours, with what the agent saw and did not."""
    return {
        (g.gpu_id, g.hour): g
        for g in GpuHour.objects.filter(gpu_id__in=gpu_ids, hour__in=hours).only(
            "pk", "gpu_id", "hour", "occupied_s", "unobserved_s", "unobserved_j", "contract_gaps"
        )
    }


def _seen_parts(gpu_ids: set[int], hours: list[datetime]) -> dict[tuple[int, datetime], dict[int, SeenPart]]:
    """What each job was measured at on these GPUs and hours, per GPU-hour and job."""
    seen: dict[tuple[int, datetime], dict[int, SeenPart]] = {}
    for job_id, gpu_id, hour, sampled_s, occupancy_s, energy_j in (
        JobGpuHour.objects.filter(gpu_id__in=gpu_ids, hour__in=hours)
        .exclude(source=Source.ESTIMATED)
        .values_list("job_id", "gpu_id", "hour", "sampled_s", "occupancy_s", "energy_j")
    ):
        seen.setdefault((gpu_id, hour), {})[job_id] = SeenPart(sampled_s, occupancy_s, energy_j)
    return seen


def _seen_power_w(job_ids: set[int]) -> dict[int, float]:
    """Each job's mean power where it was measured (any hour), for the jobs measured at all."""
    return {
        r["job_id"]: r["energy"] / r["occupancy"]
        for r in JobGpuHour.objects.filter(job_id__any=sorted(job_ids))
        .exclude(source=Source.ESTIMATED)
        .values("job_id")
        .annotate(energy=exact_sum("energy_j"), occupancy=exact_sum("occupancy_s"))
        .order_by()
        if r["occupancy"]
    }


def _estimate_rows(
    held: Holds,
    bridged: Holds,
    *,
    gaps: Mapping[tuple[int, datetime], GpuHour],
    seen: Mapping[tuple[int, datetime], dict[int, SeenPart]],
    seen_power_w: Mapping[int, float],
) -> tuple[list[JobGpuHour], list[JobGpuHourEnergy], list[GpuHour]]:
    """The estimated job-GPU-hour rows and their energy rows of each GPU-hour held, hour by hour, and the
    GPU-hours with their estimates' totals set."""
    rows, energy_rows, gpu_hours = [], [], []
    for (gpu_id, hour), holds in sorted((held | bridged).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        record = gaps.get((gpu_id, hour))
        gap = (
            GpuHourGap(
                unoccupied_s=max(0.0, 3600.0 - record.occupied_s),
                unseen_s=record.unobserved_s,
                unobserved_j=record.unobserved_j,
            )
            if record is not None
            else GpuHourGap.unmeasured()
        )
        if (gpu_id, hour) in bridged:
            if record is None or record.contract_gaps:
                continue  # an older agent's sampled time is itself an estimate: no gap to tell from it
            gap = bridged_gap(gap)
        estimates = gap_estimates(gap=gap, held_s=holds, seen=seen.get((gpu_id, hour), {}), seen_power_w=seen_power_w)
        for e in estimates:
            rows.append(
                JobGpuHour(
                    job_id=e.job_id,
                    gpu_id=gpu_id,
                    hour=hour,
                    source=Source.ESTIMATED,
                    energy_j=e.energy_j,
                    occupancy_s=e.occupancy_s,
                )
            )
            if e.energy_j > 0:
                energy_rows.append(
                    JobGpuHourEnergy(
                        job_id=e.job_id, gpu_id=gpu_id, hour=hour, method=Method.ESTIMATED, energy_j=e.energy_j
                    )
                )
        if record is not None and estimates:
            record.estimated_s, record.estimated_j = gap_totals(estimates)
            gpu_hours.append(record)
    return rows, energy_rows, gpu_hours
