"""Writes to jobs (apps/jobs/services.py): a job's summary recomputed from all its rows, in place and stored in one
UPDATE of the fields named; the span its scheduler recorded; the work it reports, which moves the data's generation.
The arithmetic of a summary is apps/jobs/summary.py's (tests/jobs/test_summary.py)."""

from __future__ import annotations

import pytest

from apps.core.kept import data_generation
from apps.jobs.models import Job
from apps.jobs.selectors import job_energy_by_method, job_gpu_totals
from apps.jobs.services import (
    BAND_FIELDS,
    SUMMARY_FIELDS,
    job_work_record,
    jobs_fields_write,
    jobs_summary_refresh,
    scheduler_span,
)
from tests.factories import HOUR, T0, GpuFactory, JobFactory, JobGpuHourEnergyFactory, JobGpuHourFactory

pytestmark = pytest.mark.django_db


def _refresh(jobs: list[Job], **kwargs: object) -> None:
    ids = [j.pk for j in jobs]
    args = {
        "totals": job_gpu_totals(job_ids=ids),
        "energy_by_method": job_energy_by_method(job_ids=ids),
        "gpu_sampled": {},
        "ingested_through": T0 + 10 * HOUR,
        **kwargs,
    }
    jobs_summary_refresh(jobs=jobs, **args)  # type: ignore[arg-type]


def _two_hours_on_two_gpus() -> Job:
    job = JobFactory(energy_j=0.0, gpu_count=0, start=None, end=None)
    for gpu in (GpuFactory(node__cluster=job.cluster), GpuFactory(node__cluster=job.cluster)):
        for hour in (T0, T0 + HOUR):
            JobGpuHourFactory(job=job, gpu=gpu, hour=hour, energy_j=1000.0)
            JobGpuHourEnergyFactory(job=job, gpu=gpu, hour=hour, energy_j=1000.0)
    return Job.objects.select_related("cluster").get(pk=job.pk)


def test_a_summary_is_recomputed_in_place_from_all_the_jobs_rows() -> None:
    # given a job over two hours on two GPUs, its stored summary stale
    job = _two_hours_on_two_gpus()
    # when
    _refresh([job])
    # then the job in hand has its summary, nothing stored yet
    assert (job.energy_j, job.gpu_count, job.attribution) == (4000.0, 2, "whole_gpu")
    assert (job.start, job.first_day) == (T0, T0.date())
    assert job.energy_low_j is None and job.energy_high_j is None  # no rows on shared GPUs given: no interval
    assert Job.objects.get(pk=job.pk).energy_j == 0.0
    # when stored
    jobs_fields_write(jobs=[job], fields=SUMMARY_FIELDS + BAND_FIELDS)
    # then
    stored = Job.objects.get(pk=job.pk)
    assert (stored.energy_j, stored.gpu_count, stored.attribution_j) == (4000.0, 2, {"whole_gpu": 4000.0})


def test_only_the_fields_named_are_stored() -> None:
    job = _two_hours_on_two_gpus()
    _refresh([job])
    job.name = "renamed in memory"
    jobs_fields_write(jobs=[job], fields=["energy_j", "energy_j"])
    stored = Job.objects.get(pk=job.pk)
    assert stored.energy_j == 4000.0 and stored.name != "renamed in memory" and stored.gpu_count == 0


def test_the_cluster_watermark_serves_where_the_run_knows_none() -> None:
    job = _two_hours_on_two_gpus()
    _refresh([job], ingested_through=None, cluster_ingested_through={job.cluster_id: T0 + HOUR})
    open_job = Job.objects.select_related("cluster").get(pk=job.pk)
    _refresh([open_job], ingested_through=None)
    # the same figures whichever way the watermark came; the summary's end is the ingest's to decide
    assert (job.energy_j, job.gpu_count) == (open_job.energy_j, open_job.gpu_count)


def test_a_job_with_no_rows_sums_to_nothing_and_no_jobs_is_nothing_to_do() -> None:
    job = Job.objects.select_related("cluster").get(pk=JobFactory(energy_j=123.0, gpu_count=3).pk)
    _refresh([job])
    assert (job.energy_j, job.gpu_count, job.start) == (0.0, 0, None)
    jobs_summary_refresh(jobs=[], totals={}, energy_by_method={}, gpu_sampled={}, ingested_through=None)


def test_the_scheduler_span_is_the_jobs_record_where_it_has_one() -> None:
    job = JobFactory.build(scheduler_start=None)
    assert scheduler_span(job) is None
    job = JobFactory.build(scheduler_start=T0, scheduler_end=T0 + HOUR, scheduler_seen_at=T0 + 2 * HOUR,
                           gpus_allocated=None)  # fmt: skip
    span = scheduler_span(job)
    assert span is not None and (span.start, span.end, span.seen_at, span.gpus) == (T0, T0 + HOUR, T0 + 2 * HOUR, 0)


def test_reported_work_is_stored_and_moves_the_generation() -> None:
    job = JobFactory()
    before = data_generation()
    job_work_record(job=job, work_units=1200.0, work_unit="1k_tokens")
    stored = Job.objects.get(pk=job.pk)
    assert (stored.work_units, stored.work_unit) == (1200.0, "1k_tokens")
    assert data_generation() > before
