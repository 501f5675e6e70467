"""Writes to flags (apps/waste/services.py): each kind raised while its condition holds, with its evidence, never
twice, its evidence updated and its review kept, and withdrawn once the condition no longer holds unless somebody
reviewed it; each job's list of flag kinds, its own and its GPU-hours'. The conservation flag by its thresholds:
tests/waste/test_conservation_flag.py; the findings' arithmetic: tests/waste/test_findings_thresholds.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

import pytest

from apps.core.units.footprint import Footprint
from apps.jobs.models import Job
from apps.jobs.summary import JobGpuTotals
from apps.waste.models import Flag
from apps.waste.services import (
    estimated_intensity_flags_sync,
    failed_run_flags_sync,
    gpu_hour_flag_kinds,
    gpu_hour_flags_replace,
    job_findings_sync,
    job_flag_lists_sync,
    low_coverage_flags_sync,
    unobserved_flags_sync,
)
from tests.factories import HOUR, T0, ClusterFactory, FlagFactory, GpuFactory, JobFactory, JobGpuHourFactory

pytestmark = pytest.mark.django_db

GIB = 1024**3


@dataclass
class _Hour:
    """A GPU-hour's fields the flags read."""

    gpu_id: int
    hour: datetime = T0
    source: str = "agent"
    sampled_s: float = 3600.0
    device_energy_j: float = 1.8e6
    dcgm_energy_j: float | None = 1.8e6
    residual_j: float | None = 0.0
    residual_ratio: float | None = 0.0
    counter_resets: int = 0
    agent_version: str = "1.4.0"
    contract_gaps: list[str] = field(default_factory=list)


def _kinds(**fields: object) -> list[str]:
    return gpu_hour_flag_kinds(_Hour(gpu_id=1, **fields), scrape_interval_s=15)  # type: ignore[arg-type]


def _statuses(kind: str) -> dict[int | None, str]:
    return dict(Flag.objects.filter(kind=kind).values_list("job_id", "status"))


# GPU-hour flags


def test_a_gpu_hours_kinds() -> None:
    assert _kinds() == []
    assert _kinds(contract_gaps=["occupancy"]) == ["estimated_occupancy"]
    # a reset explains a residual: no conservation flag beside it
    assert _kinds(counter_resets=2, residual_ratio=0.5) == ["counter_reset"]
    assert _kinds(residual_ratio=-0.5) == ["conservation"]
    assert _kinds(residual_ratio=0.5, source="dcgm") == []


def test_a_gpu_hours_flags_follow_it_and_a_reviewed_one_stays() -> None:
    cluster = ClusterFactory()
    a, b = GpuFactory(node__cluster=cluster), GpuFactory(node__cluster=cluster)
    # when an hour has a reset on one GPU and a gap on the other
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[_Hour(a.pk, counter_resets=1),
                                                          _Hour(b.pk, contract_gaps=["gpu_time"])])  # fmt: skip
    assert set(Flag.objects.values_list("kind", "gpu_id")) == {("counter_reset", a.pk), ("estimated_occupancy", b.pk)}
    reviewed = Flag.objects.get(kind="counter_reset")
    Flag.objects.filter(pk=reviewed.pk).update(status="acknowledged")
    # when the hour is ingested again, both GPUs healthy
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[_Hour(a.pk), _Hour(b.pk)])
    # then the open flag is withdrawn, the reviewed one kept
    assert list(Flag.objects.values_list("pk", "status")) == [(reviewed.pk, "acknowledged")]
    # and raised again the same, it is the same flag with its evidence updated
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[_Hour(a.pk, counter_resets=3)])
    assert list(Flag.objects.values_list("pk", "status")) == [(reviewed.pk, "acknowledged")]
    assert Flag.objects.get().evidence["counter_resets"] == 3


# job flags held while their condition holds


def test_low_coverage_is_raised_held_and_withdrawn_unless_reviewed() -> None:
    seen_little = JobFactory(coverage=0.5, sampled_s=1800.0, expected_s=3600.0)
    never_sampled = JobFactory(coverage=0.0, sampled_s=0.0)
    fine = JobFactory(coverage=1.0)
    low_coverage_flags_sync(jobs=[seen_little, never_sampled, fine])
    assert _statuses("low_coverage") == {seen_little.pk: "open"}
    assert Flag.objects.get(kind="low_coverage").evidence["coverage"] == 0.5
    # twice: the same flag, its evidence updated
    seen_little.coverage = 0.6
    low_coverage_flags_sync(jobs=[seen_little])
    assert Flag.objects.filter(kind="low_coverage").count() == 1
    assert Flag.objects.get(kind="low_coverage").evidence["coverage"] == 0.6
    # fixed: withdrawn; but a disputed one stays
    Flag.objects.filter(kind="low_coverage").update(status="disputed")
    seen_little.coverage = 1.0
    low_coverage_flags_sync(jobs=[seen_little])
    assert _statuses("low_coverage") == {seen_little.pk: "disputed"}


def test_estimated_intensity_on_the_jobs_whose_hours_were_filled_in() -> None:
    filled = JobFactory(intensity_estimated=True, intensity_source="em", intensity_basis="location")
    measured = JobFactory(intensity_estimated=False)
    FlagFactory(cluster=measured.cluster, job=measured, kind="estimated_intensity")  # from before: withdrawn
    estimated_intensity_flags_sync(jobs=[filled, measured])
    assert _statuses("estimated_intensity") == {filled.pk: "open"}
    assert Flag.objects.get(kind="estimated_intensity").evidence == {
        "intensity_source": "em", "intensity_basis": "location"
    }  # fmt: skip


def test_a_failed_run_carries_its_whole_cost_and_goes_when_the_job_completes() -> None:
    failed = JobFactory(state="timeout", exit_code=0, signal=15, gpu_hours=2.0, cost=Decimal("5.555"))
    cancelled = JobFactory(state="cancelled")
    jobs = list(Job.objects.select_related("job_group").filter(pk__in=[failed.pk, cancelled.pk]))
    failed_run_flags_sync(jobs=jobs)
    evidence = Flag.objects.get(kind="failed_run").evidence
    assert _statuses("failed_run") == {failed.pk: "open"}
    assert (evidence["state"], evidence["signal"], evidence["gpu_hours_blocked"], evidence["cost"]) == (
        "timeout", 15, 2.0, "5.56",
    )  # fmt: skip
    # requeued, then completed: the finding goes
    Job.objects.filter(pk=failed.pk).update(state="completed")
    failed_run_flags_sync(jobs=list(Job.objects.select_related("job_group").filter(pk=failed.pk)))
    assert not Flag.objects.filter(kind="failed_run").exists()


def test_unobserved_time_is_raised_from_the_estimated_part_of_a_jobs_gpu_hours() -> None:
    job = JobFactory()
    seen = JobGpuTotals(gpu_id=1, gpu_uuid="GPU-a", occupancy_s=3600.0, footprint=Footprint(energy_j=3.6e6))
    unseen = JobGpuTotals(gpu_id=1, gpu_uuid="GPU-a", source="estimated", occupancy_s=1800.0,
                          footprint=Footprint(energy_j=1.8e6, cost=Decimal("1.234")))  # fmt: skip
    unobserved_flags_sync(jobs=[job], totals={job.pk: [seen, unseen]})
    evidence = Flag.objects.get(kind="unobserved", job=job).evidence
    assert (evidence["estimated_gpu_hours"], evidence["gpu_hours"], evidence["estimated_cost"]) == (0.5, 1.5, "1.23")
    assert evidence["gpus"] == ["GPU-a"]
    unobserved_flags_sync(jobs=[job], totals={job.pk: [seen]})
    assert not Flag.objects.filter(kind="unobserved").exists()


def _idle_and_hog() -> tuple[Job, dict[int, list[JobGpuTotals]]]:
    job = JobFactory(gpus_allocated=None)
    quiet = {"sampled_s": 3600.0, "occupancy_s": 3600.0, "sm_s": 1.0, "first_hour": T0, "last_hour": T0}
    idle = JobGpuTotals(gpu_id=1, gpu_uuid="GPU-idle", peak_memory_bytes=0, **quiet)  # type: ignore[arg-type]
    hog = JobGpuTotals(gpu_id=2, gpu_uuid="GPU-hog", peak_memory_bytes=10 * GIB, **{**quiet, "occupancy_s": 1800.0})  # type: ignore[arg-type]
    return job, {job.pk: [idle, hog]}


def test_memory_hogs_and_idle_allocations_from_a_jobs_totals_never_twice() -> None:
    job, totals = _idle_and_hog()
    job_findings_sync(totals=totals, jobs=[job])
    job_findings_sync(totals=totals, jobs=[job])
    found = {f.kind: f.evidence["gpus"] for f in Flag.objects.filter(job=job)}
    assert found == {"idle_allocation": ["GPU-idle"], "memory_hog": ["GPU-hog"]}
    # when the job computes after all: both withdrawn
    busy = {job.pk: [JobGpuTotals(gpu_id=1, gpu_uuid="GPU-idle", sampled_s=3600.0, occupancy_s=3600.0, sm_s=3500.0,
                                  first_hour=T0, last_hour=T0)]}  # fmt: skip
    job_findings_sync(totals=busy, jobs=[job])
    assert not Flag.objects.filter(job=job).exists()
    job_findings_sync(totals={}, jobs=[])  # nothing to do


# each job's list of kinds


def test_a_jobs_list_of_kinds_is_its_own_and_its_gpu_hours() -> None:
    row = JobGpuHourFactory(hour=T0)
    job, gpu = row.job, row.gpu
    Job.objects.filter(pk=job.pk).update(flags=["stale"])
    FlagFactory(cluster=job.cluster, job=job, kind="memory_hog")
    FlagFactory(cluster=job.cluster, job=None, gpu=gpu, hour=T0, kind="conservation")
    FlagFactory(cluster=job.cluster, job=None, gpu=gpu, hour=T0 + HOUR, kind="counter_reset")
    untouched = JobFactory(flags=[])
    job_flag_lists_sync(job_ids=[job.pk, untouched.pk])
    assert Job.objects.get(pk=job.pk).flags == ["conservation", "memory_hog"]  # not the other hour's reset
    assert Job.objects.get(pk=untouched.pk).flags == []
    job_flag_lists_sync(job_ids=[])
