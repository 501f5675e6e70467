"""Writes to flags: raised while their condition holds, withdrawn (if nobody reviewed them) once it
no longer does, so re-ingesting an hour leaves them as they were."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Max, Min, Q, Sum

from apps.core.bulk import rows_update
from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.telemetry.models import GpuHour

from .findings import JobGpuUse, Thresholds, findings
from .models import Flag

GPU_HOUR_KINDS = (Flag.Kind.COUNTER_RESET, Flag.Kind.CONSERVATION)


def gpu_hour_flag_kinds(row: GpuHour, *, scrape_interval_s: int) -> list[str]:
    """`counter_reset` when the driver's counter went backwards; `conservation` when the agent saw the
    whole hour and still differs from DCGM by more than the threshold (a reset explains a residual)."""
    kinds = []
    if row.counter_resets:
        kinds.append(Flag.Kind.COUNTER_RESET)
    elif (
        row.source == "agent"
        and row.residual_ratio is not None
        and abs(row.residual_ratio) > settings.FLEETWATT_CONSERVATION_THRESHOLD
        and row.sampled_s >= 3600 - 2 * scrape_interval_s
    ):
        kinds.append(Flag.Kind.CONSERVATION)
    return kinds


def gpu_hour_flags_replace(*, cluster: Cluster, hour: datetime, rows: Sequence[GpuHour]) -> None:
    wanted: dict[tuple[str, int], dict] = {}
    for row in rows:
        for kind in gpu_hour_flag_kinds(row, scrape_interval_s=cluster.scrape_interval_s):
            wanted[(kind, row.gpu.pk)] = {
                "device_energy_j": row.device_energy_j,
                "dcgm_energy_j": row.dcgm_energy_j,
                "residual_j": row.residual_j,
                "residual_ratio": row.residual_ratio,
                "counter_resets": row.counter_resets,
            }
    existing = Flag.objects.filter(cluster=cluster, hour=hour, job__isnull=True, kind__in=GPU_HOUR_KINDS)
    existing.filter(status=Flag.Status.OPEN).exclude(
        Q(pk__in=[f.pk for f in existing if (f.kind, f.gpu_id) in wanted])
    ).delete()
    for (kind, gpu_id), evidence in wanted.items():
        Flag.objects.update_or_create(
            kind=kind, cluster=cluster, job=None, gpu_id=gpu_id, hour=hour, defaults={"evidence": evidence}
        )


def job_flags_sync(*, jobs: Sequence[Job]) -> None:
    """The job's own flags (low coverage) and the kinds of flags on the GPU-hours it ran in."""
    if not jobs:
        return
    threshold = settings.FLEETWATT_COVERAGE_THRESHOLD
    by_id = {j.pk: j for j in jobs}
    _job_flag_hold(
        kind=Flag.Kind.LOW_COVERAGE,
        jobs=jobs,
        raised={
            job: {
                "coverage": job.coverage,
                "sampled_s": job.sampled_s,
                "expected_s": job.expected_s,
                "energy_j": job.energy_j,
                "threshold": threshold,
            }
            for job in jobs
            if job.coverage < threshold and job.sampled_s > 0
        },
    )
    kinds: dict[int, set[str]] = defaultdict(set)
    for job_id, kind in Flag.objects.filter(job_id__in=by_id).values_list("job_id", "kind"):
        kinds[job_id].add(kind)
    # GPU-hour flags are rare: look up the jobs' rows in the flagged GPU-hours only.
    hour_flags: dict[tuple[int, datetime], set[str]] = defaultdict(set)
    for gpu_id, hour, kind in Flag.objects.filter(job__isnull=True, kind__in=GPU_HOUR_KINDS).values_list(
        "gpu_id", "hour", "kind"
    ):
        hour_flags[(gpu_id, hour)].add(kind)
    if hour_flags:
        gpu_ids = {g for g, _ in hour_flags}
        for job_id, gpu_id, hour in JobGpuHour.objects.filter(job_id__in=by_id, gpu_id__in=gpu_ids).values_list(
            "job_id", "gpu_id", "hour"
        ):
            kinds[job_id] |= hour_flags.get((gpu_id, hour), set())
    changed = []
    for job in jobs:
        new = sorted(kinds.get(job.pk, set()))
        if new != sorted(job.flags):
            job.flags = new
            changed.append(job)
    rows_update(changed, ["flags"])


def estimated_intensity_flags_sync(*, jobs: Sequence[Job]) -> None:
    """`estimated_intensity` on jobs some of whose hours had no recorded intensity (filled in). The jobs'
    flag lists follow with job_flags_sync (job_findings_sync ends with it)."""
    if not jobs:
        return
    _job_flag_hold(
        kind=Flag.Kind.ESTIMATED_INTENSITY,
        jobs=jobs,
        raised={
            job: {"intensity_source": job.intensity_source, "intensity_basis": job.intensity_basis}
            for job in jobs
            if job.intensity_estimated
        },
    )


def _job_flag_hold(*, kind: str, jobs: Sequence[Job], raised: dict[Job, dict[str, Any]]) -> None:
    """The job-level flag `kind` raised, with its evidence, on the jobs of `raised`, and withdrawn from the
    other `jobs` unless somebody reviewed it."""
    cleared = [j.pk for j in jobs if j not in raised]
    Flag.objects.filter(kind=kind, job_id__in=cleared, status=Flag.Status.OPEN).delete()
    for job, evidence in raised.items():
        Flag.objects.update_or_create(
            kind=kind, cluster_id=job.cluster_id, job=job, gpu=None, hour=None, defaults={"evidence": evidence}
        )


def job_findings_sync(*, job_ids: Iterable[int]) -> None:
    """memory_hog and idle_allocation for the jobs, from all their rows: raised or updated while the
    condition holds (never duplicated), withdrawn if nobody reviewed them once it no longer does."""
    ids = sorted(set(job_ids))
    if not ids:
        return
    uses: dict[int, list[JobGpuUse]] = defaultdict(list)
    for r in (
        JobGpuHour.objects.filter(job_id__in=ids)
        .values("job_id", "gpu__uuid")
        .annotate(
            first=Min("hour"), last=Max("hour"), sampled=Sum("sampled_s"), sm=Sum("sm_s"), occ=Sum("occupancy_s"),
            mem=Max("peak_memory_bytes"), energy=Sum("energy_j"), kwh=Sum("facility_kwh"),
            op=Sum("operational_kg"), emb=Sum("embodied_kg"), cost=Sum("cost"),
        )
        .order_by()
    ):  # fmt: skip
        uses[r["job_id"]].append(
            JobGpuUse(
                gpu_uuid=r["gpu__uuid"], first_hour=r["first"], last_hour=r["last"], sampled_s=r["sampled"] or 0.0,
                sm_s=r["sm"] or 0.0, occupancy_s=r["occ"] or 0.0, peak_memory_bytes=r["mem"] or 0,
                energy_j=r["energy"] or 0.0, facility_kwh=r["kwh"] or 0.0,
                co2e_kg=(r["op"] or 0.0) + (r["emb"] or 0.0), cost=r["cost"] or Decimal(0),
            )
        )  # fmt: skip
    thresholds = Thresholds(
        hog_min_memory_bytes=settings.FLEETWATT_HOG_MIN_MEMORY_BYTES,
        hog_max_sm=settings.FLEETWATT_HOG_MAX_SM,
        hog_min_seconds=settings.FLEETWATT_HOG_MIN_SECONDS,
        idle_max_sm=settings.FLEETWATT_IDLE_MAX_SM,
        idle_min_seconds=settings.FLEETWATT_IDLE_MIN_SECONDS,
    )
    jobs = list(Job.objects.filter(pk__in=ids))
    kinds = (Flag.Kind.MEMORY_HOG, Flag.Kind.IDLE_ALLOCATION)
    found = {job.pk: findings(uses.get(job.pk, []), thresholds) for job in jobs}
    # Withdraw the open findings whose condition no longer holds: one statement per kind.
    for kind in kinds:
        gone = [job.pk for job in jobs if kind not in found[job.pk]]
        Flag.objects.filter(job_id__in=gone, kind=kind, status=Flag.Status.OPEN).delete()
    existing = {(f.job_id, f.kind): f for f in Flag.objects.filter(job_id__in=ids, kind__in=kinds)}
    for job in jobs:
        for kind, evidence in found[job.pk].items():
            flag = existing.get((job.pk, kind))
            if flag is None:
                Flag.objects.create(kind=kind, cluster_id=job.cluster_id, job=job, evidence=evidence)
            elif flag.evidence != evidence:
                flag.evidence = evidence
                flag.save(update_fields=["evidence", "updated_at"])
    job_flags_sync(jobs=jobs)
