"""Reads of the pages (apps/dashboard/selectors.py): each cluster's ingest and scheduler sync on the status page, the
jobs of a GPU-hour finding, and the hours of a job that nobody saw whole. The pages that show them:
tests/dashboard/test_scheduler_pages.py, tests/dashboard/test_audit_queue.py, tests/dashboard/test_job_lookup.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.dashboard.selectors import (
    RECENT_MISSING_LISTED,
    UNSEEN_MIN_S,
    gpu_hour_flag_jobs,
    job_hour_gaps,
    scheduler_sync_status,
)
from apps.jobs.models import Job
from apps.telemetry.models import IngestBatch, IngestedHour, IngestWatermark
from tests.factories import (
    HOUR,
    T0,
    ClusterFactory,
    FlagFactory,
    GpuFactory,
    GpuHourFactory,
    JobFactory,
    JobGpuHourFactory,
)

pytestmark = pytest.mark.django_db

NOW = T0 + 5 * HOUR + timedelta(minutes=20)


# scheduler_sync_status


def test_each_cluster_by_name_with_how_far_its_ingest_and_sync_have_got() -> None:
    # given a cluster ingested through 12:00 and synced through 14:50, another never ingested nor synced
    b = ClusterFactory(name="b", scheduler="slurm_sacct", scheduler_synced_through=NOW - timedelta(minutes=30))
    a = ClusterFactory(name="a")
    IngestWatermark.objects.create(cluster=b, ingested_through=T0 + 2 * HOUR)
    # when
    lines = scheduler_sync_status(now=NOW)
    # then
    assert [line.cluster.name for line in lines] == ["a", "b"]
    never, synced = lines
    assert (never.ingested_through, never.ingest_lag_h, never.scheduler_lag_h, never.has_scheduler) == (
        None, None, None, False,
    )  # fmt: skip
    assert synced.ingest_lag_h == 3  # whole hours from 12:00 to the hour of now (15:00)
    assert synced.scheduler_lag_h == pytest.approx(0.5) and synced.has_scheduler
    assert never.cluster == a


def test_the_last_days_jobs_unknown_to_the_scheduler_and_missing_from_it() -> None:
    cluster = ClusterFactory()
    JobFactory(cluster=cluster, state="unknown", last_seen=NOW - HOUR)
    JobFactory(cluster=cluster, state="completed", last_seen=None)  # no last-seen time: still seen
    JobFactory(cluster=cluster, state="completed", last_seen=NOW - timedelta(days=2))  # older than a day
    JobFactory(cluster=cluster, state="completed", start=NOW + HOUR, last_seen=NOW + HOUR)  # not started by now
    missing = [
        JobFactory(cluster=cluster, scheduler_missing=True, start=T0 + k * timedelta(minutes=1), last_seen=NOW)
        for k in range(RECENT_MISSING_LISTED + 2)
    ]
    # when
    [line] = scheduler_sync_status(now=NOW)
    # then
    assert (line.recent_jobs, line.unknown, line.missing) == (2 + len(missing), 1 + len(missing), len(missing))
    # the newest missing ones are named, at most ten
    assert [j.pk for j in line.missing_jobs] == [j.pk for j in reversed(missing)][:RECENT_MISSING_LISTED]


def test_an_open_ingest_batch_and_the_gpus_without_a_meter_are_shown() -> None:
    cluster = ClusterFactory()
    IngestBatch.objects.create(cluster=cluster, start=T0, end=T0 + HOUR, error="prometheus: timed out")
    IngestBatch.objects.create(cluster=cluster, start=T0 - HOUR, end=T0, done_at=T0)
    meterless = [{"gpu": "GPU-1", "hostname": "n1"}]
    IngestedHour.objects.create(cluster=cluster, hour=T0 - HOUR, stats={})
    IngestedHour.objects.create(cluster=cluster, hour=T0, stats={"no_energy_meter": meterless})
    [line] = scheduler_sync_status(now=NOW)
    assert line.open_batch is not None and line.open_batch.error == "prometheus: timed out"
    assert line.no_energy_meter == meterless


def test_the_status_page_reads_a_fixed_number_of_queries(django_assert_max_num_queries) -> None:
    for k in range(4):
        ClusterFactory(name=f"c{k}")
    with django_assert_max_num_queries(5):
        scheduler_sync_status(now=NOW)


# gpu_hour_flag_jobs


def test_a_gpu_hour_finding_lists_each_job_on_its_gpu_that_hour_once() -> None:
    # given two jobs on a GPU at 10:00 (one with two rows: the same job once), another job the hour after
    gpu = GpuFactory()
    cluster = gpu.node.cluster
    first, second = JobFactory(cluster=cluster, job_key="a/1"), JobFactory(cluster=cluster, job_key="b/2")
    JobGpuHourFactory(job=first, gpu=gpu, hour=T0)
    JobGpuHourFactory(job=second, gpu=gpu, hour=T0)
    JobGpuHourFactory(job=JobFactory(cluster=cluster), gpu=gpu, hour=T0 + HOUR)
    finding = FlagFactory(cluster=cluster, job=None, gpu=gpu, hour=T0, kind="conservation")
    jobs_finding = FlagFactory(cluster=cluster, job=first)
    # when
    found = gpu_hour_flag_jobs([finding, jobs_finding])
    # then by job key; a job's finding is not a GPU-hour's
    assert found == {finding.pk: [first, second]}
    assert gpu_hour_flag_jobs([jobs_finding]) == {}


def test_a_gpu_hour_with_no_job_lists_none() -> None:
    gpu = GpuFactory()
    finding = FlagFactory(cluster=gpu.node.cluster, job=None, gpu=gpu, hour=T0, kind="counter_reset")
    assert gpu_hour_flag_jobs([finding]) == {finding.pk: []}


# job_hour_gaps


def test_a_jobs_gaps_are_its_gpu_hours_where_time_went_unseen() -> None:
    # given a job over two hours on one GPU: 10:00 seen whole (a meters' disagreement of 10 s), 11:00 with 20 min
    # unseen; another GPU's gap in the same hour is not the job's
    row = JobGpuHourFactory(hour=T0)
    job, gpu = row.job, row.gpu
    JobGpuHourFactory(job=job, gpu=gpu, hour=T0 + HOUR)
    GpuHourFactory(gpu=gpu, hour=T0, unobserved_s=UNSEEN_MIN_S - 8)
    GpuHourFactory(gpu=gpu, hour=T0 + HOUR, unobserved_s=1200, unobserved_j=1.5e5)
    GpuHourFactory(gpu=GpuFactory(node=gpu.node), hour=T0 + HOUR, unobserved_s=3600)
    # when
    gaps = job_hour_gaps(job=job)
    # then
    assert list(gaps) == [(gpu.pk, T0 + HOUR)]
    gap = gaps[(gpu.pk, T0 + HOUR)]
    assert (gap.unobserved_s, gap.unobserved_j, gap.estimated_s) == (1200, 1.5e5, 0.0)


def test_an_hour_a_scheduler_estimate_filled_is_a_gap_however_short() -> None:
    row = JobGpuHourFactory(hour=T0)
    GpuHourFactory(gpu=row.gpu, hour=T0, unobserved_s=0.0, estimated_s=5.0)
    assert job_hour_gaps(job=Job.objects.get(pk=row.job_id))[(row.gpu_id, T0)].estimated_s == 5.0
