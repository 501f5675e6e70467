"""Writes to flags: raised while their condition holds, withdrawn (if nobody reviewed them) once it
no longer does, so re-ingesting an hour leaves them as they were."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Q

from apps.core.db.bulk import rows_update
from apps.core.units.footprint import Footprint
from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.jobs.states import JobState
from apps.jobs.summary import JobGpuTotals

from .findings import FINDING_KINDS, Allocation, Thresholds, failed_run_evidence, findings, unobserved_evidence
from .kinds import GPU_HOUR_KINDS
from .models import Flag

# The GPU-hour columns the two functions below read: the caller loads these only, as rows (values_list(...,
# named=True)), not the thirty-odd columns of a thousand GPU-hours per cluster-hour as model instances.
GPU_HOUR_FLAG_FIELDS = (
    "gpu_id", "hour", "source", "sampled_s", "device_energy_j", "dcgm_energy_j", "residual_j", "residual_ratio",
    "counter_resets", "agent_version", "contract_gaps",
)  # fmt: skip


class GpuHourFlagRow(Protocol):
    """What the GPU-hour flags read of a GPU-hour (GPU_HOUR_FLAG_FIELDS): a GpuHour, or a row of those fields."""

    @property
    def gpu_id(self) -> int: ...
    @property
    def hour(self) -> datetime: ...
    @property
    def source(self) -> str: ...
    @property
    def sampled_s(self) -> float: ...
    @property
    def device_energy_j(self) -> float: ...
    @property
    def dcgm_energy_j(self) -> float | None: ...
    @property
    def residual_j(self) -> float | None: ...
    @property
    def residual_ratio(self) -> float | None: ...
    @property
    def counter_resets(self) -> int: ...
    @property
    def agent_version(self) -> str: ...
    @property
    def contract_gaps(self) -> list[str]: ...


def gpu_hour_flag_kinds(row: GpuHourFlagRow, *, scrape_interval_s: int) -> list[str]:
    """`counter_reset` when the driver's counter went backwards; `conservation` when the agent saw the
    whole hour and still differs from DCGM by more than the threshold (a reset explains a residual);
    `estimated_occupancy` when an older agent left out extension series that were estimated."""
    kinds: list[str] = []
    if row.contract_gaps:
        kinds.append(Flag.Kind.ESTIMATED_OCCUPANCY)
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


def gpu_hour_flags_replace(*, cluster: Cluster, hour: datetime, rows: Sequence[GpuHourFlagRow]) -> None:
    wanted: dict[tuple[str, int], dict] = {}
    for row in rows:
        for kind in gpu_hour_flag_kinds(row, scrape_interval_s=cluster.scrape_interval_s):
            wanted[(kind, row.gpu_id)] = {
                "device_energy_j": row.device_energy_j,
                "dcgm_energy_j": row.dcgm_energy_j,
                "residual_j": row.residual_j,
                "residual_ratio": row.residual_ratio,
                "counter_resets": row.counter_resets,
                "agent_version": row.agent_version,
                "contract_gaps": row.contract_gaps,
            }
    existing = Flag.objects.filter(cluster=cluster, hour=hour, job__isnull=True, kind__in=GPU_HOUR_KINDS)
    existing.filter(status=Flag.Status.OPEN).exclude(
        Q(pk__in=[f.pk for f in existing if (f.kind, f.gpu_id) in wanted])
    ).delete()
    for (kind, gpu_id), evidence in wanted.items():
        Flag.objects.update_or_create(
            kind=kind, cluster=cluster, job=None, gpu_id=gpu_id, hour=hour, defaults={"evidence": evidence}
        )


def low_coverage_flags_sync(*, jobs: Sequence[Job]) -> None:
    """`low_coverage` on the jobs the agent saw less than the threshold of, with what it saw."""
    threshold = settings.FLEETWATT_COVERAGE_THRESHOLD
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


def job_flag_lists_sync(*, job_ids: Iterable[int]) -> None:
    """Each job's list of flag kinds: its own flags and those of the GPU-hours it ran in."""
    ids = sorted(set(job_ids))
    if not ids:
        return
    kinds: dict[int, set[str]] = defaultdict(set)
    for job_id, kind in Flag.objects.filter(job_id__any=ids).values_list("job_id", "kind"):
        kinds[job_id].add(kind)
    # GPU-hour flags are rare: look up the jobs' rows in the flagged GPU-hours only.
    hour_flags: dict[tuple[int, datetime | None], set[str]] = defaultdict(set)
    for gpu_id, hour, kind in Flag.objects.filter(job__isnull=True, kind__in=GPU_HOUR_KINDS).values_list(
        "gpu_id", "hour", "kind"
    ):
        hour_flags[(gpu_id, hour)].add(kind)
    if hour_flags:
        gpu_ids = {g for g, _ in hour_flags}
        for job_id, gpu_id, hour in JobGpuHour.objects.filter(job_id__any=ids, gpu_id__in=gpu_ids).values_list(
            "job_id", "gpu_id", "hour"
        ):
            kinds[job_id] |= hour_flags.get((gpu_id, hour), set())
    changed = []  # an instance only for a job whose list changes (the hour's hundreds of jobs: most do not)
    for job_id, flags in Job.objects.filter(pk__any=ids).values_list("pk", "flags"):
        new = sorted(kinds.get(job_id, set()))
        if new != sorted(flags):
            changed.append(Job(pk=job_id, flags=new))
    rows_update(changed, ["flags"])


def estimated_intensity_flags_sync(*, jobs: Sequence[Job]) -> None:
    """`estimated_intensity` on jobs some of whose hours had no recorded intensity (filled in)."""
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
    Flag.objects.filter(kind=kind, job_id__any=cleared, status=Flag.Status.OPEN).delete()
    _job_flags_put(kind=kind, evidence={job: evidence for job, evidence in raised.items()})


def _job_flags_put(*, kind: str, evidence: Mapping[Job, dict[str, Any]]) -> None:
    """Raise `kind` on each job with its evidence, or update the evidence of the flag it has (its review
    status stays): one statement, safe against a concurrent ingest raising the same flag."""
    Flag.objects.bulk_create(
        [Flag(kind=kind, cluster_id=job.cluster_id, job=job, evidence=e) for job, e in evidence.items()],
        update_conflicts=True,
        unique_fields=["kind", "cluster", "job", "gpu", "hour"],
        update_fields=["evidence", "updated_at"],
    )


def unobserved_flags_sync(*, jobs: Sequence[Job], totals: Mapping[int, Sequence[JobGpuTotals]]) -> None:
    """`unobserved` on the jobs charged for time they held GPUs without being seen there (the agent down,
    a GPU without an agent), with how much of their GPU-hours and energy is that estimate."""
    raised = {}
    for job in jobs:
        evidence = unobserved_evidence(totals.get(job.pk, []))
        if evidence is not None:
            raised[job] = evidence
    _job_flag_hold(kind=Flag.Kind.UNOBSERVED, jobs=jobs, raised=raised)


def failed_run_flags_sync(*, jobs: Sequence[Job]) -> None:
    """`failed_run` on the jobs whose scheduler says they failed (apps.jobs.states), with what they cost;
    withdrawn, unless reviewed, from a job whose state changed (a requeued job that then completed)."""
    _job_flag_hold(
        kind=Flag.Kind.FAILED_RUN,
        jobs=jobs,
        raised={
            job: failed_run_evidence(
                state=job.state,
                exit_code=job.exit_code,
                signal=job.signal,
                job_group=job.job_group.name if job.job_group else "",
                spent=Footprint.from_sums(
                    {
                        name: getattr(job, name)
                        for name in (
                            "energy_j",
                            "gpu_hours",
                            "server_kwh",
                            "facility_kwh",
                            "operational_kg",
                            "embodied_kg",
                            "cost",
                        )
                    }
                ),
            )
            for job in jobs
            if JobState(job.state).is_failed_run
        },
    )


def _allocation(job: Job) -> Allocation | None:
    """The GPUs the job's scheduler gave it and for how long, where it recorded both."""
    until = job.scheduler_end or job.scheduler_seen_at
    if not job.gpus_allocated or job.scheduler_start is None or until is None:
        return None
    return Allocation(gpus=job.gpus_allocated, held_s=max(0.0, (until - job.scheduler_start).total_seconds()))


def job_findings_sync(*, totals: Mapping[int, Sequence[JobGpuTotals]], jobs: Sequence[Job]) -> None:
    """memory_hog and idle_allocation for the jobs, from their per-GPU totals: raised or updated while the
    condition holds (never duplicated), withdrawn if nobody reviewed them once it no longer does."""
    if not jobs:
        return
    thresholds = Thresholds(
        hog_min_memory_bytes=settings.FLEETWATT_HOG_MIN_MEMORY_BYTES,
        hog_max_sm=settings.FLEETWATT_HOG_MAX_SM,
        hog_min_seconds=settings.FLEETWATT_HOG_MIN_SECONDS,
        idle_max_sm=settings.FLEETWATT_IDLE_MAX_SM,
        idle_min_seconds=settings.FLEETWATT_IDLE_MIN_SECONDS,
    )
    kinds: tuple[str, ...] = FINDING_KINDS
    found = {job.pk: findings(totals.get(job.pk, []), thresholds, _allocation(job)) for job in jobs}
    # Withdraw the open findings whose condition no longer holds: one statement per kind.
    for kind in kinds:
        gone = [job.pk for job in jobs if kind not in found[job.pk]]
        Flag.objects.filter(job_id__any=gone, kind=kind, status=Flag.Status.OPEN).delete()
    for kind in kinds:
        _job_flags_put(kind=kind, evidence={job: found[job.pk][kind] for job in jobs if kind in found[job.pk]})
