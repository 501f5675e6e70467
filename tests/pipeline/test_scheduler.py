"""apps.pipeline.scheduler: the scheduler sync's use case around its records. Which clusters are synced (by name, or
every one with a scheduler or Kubernetes pods beside it); the watermark never passes the time of the read nor goes
back; a running job read again unchanged derives only the hours since its record was last read; an unreadable
scheduler is recorded and writes nothing; a database that cannot be reached stops the catch-up for the task to
retry (any other fault of one cluster's is recorded and the others go on: tests/schedulers/test_bad_answers.py).
With sacct, slurmrestd and the records' writes: tests/schedulers/test_sync.py; the spans' energy end to end:
tests/pipeline/test_scheduler_span.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import OperationalError

from apps.fleet.models import Cluster
from apps.jobs.models import Job
from apps.jobs.states import JobState
from apps.pipeline import scheduler
from apps.pipeline.derive import Fact, Scope
from apps.pipeline.scheduler import (
    SchedulerSyncError,
    scheduler_clusters_select,
    scheduler_sync,
    schedulers_catch_up,
    sync_windows,
)
from apps.schedulers.slurm import SchedulerJob
from apps.schedulers.sources import SchedulerUnavailable
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 2, 8, tzinfo=UTC)
H = timedelta(hours=1)


def _record(job_id: str = "42", *, end: datetime | None = None, state: JobState = JobState.RUNNING) -> SchedulerJob:
    return SchedulerJob(
        job_key=f"slurm/{job_id}", job_id=job_id, display_id=job_id, user="ada", account="vision", partition="gpu",
        qos="normal", name="train", state=state, state_raw=state.value.upper(), exit_code=None, signal=None,
        submit=START, start=START + timedelta(minutes=10), end=end, gpus_requested=1, gpus_allocated=1,
        nodes=("gpu-a",),
    )  # fmt: skip


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> list[SchedulerJob]:
    """What the cluster's scheduler answers (the same whatever the window)."""
    answer: list[SchedulerJob] = []
    monkeypatch.setattr(scheduler, "scheduler_records_read", lambda **kwargs: list(answer))
    return answer


@pytest.fixture
def derived(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Scope, set[Fact]]]:
    calls: list[tuple[Scope, set[Fact]]] = []
    real = scheduler.derive

    def spy(scope: Scope, *, changed: Any) -> Any:
        calls.append((scope, set(changed)))
        return real(scope, changed=changed)

    monkeypatch.setattr(scheduler, "derive", spy)
    return calls


def test_clusters_are_selected_by_name_or_every_one_with_records() -> None:
    ClusterFactory(name="c-none")
    slurm = ClusterFactory(name="b-slurm", scheduler="slurm_sacct")
    pods = ClusterFactory(name="a-pods", kube_pods=True)
    kube = ClusterFactory(name="d-kube", scheduler="kube_state_metrics")
    assert scheduler_clusters_select(None) == [pods, slurm, kube]  # by name
    assert scheduler_clusters_select("b-slurm") == [slurm]
    with pytest.raises(SchedulerSyncError, match="Cluster 'c-none' has no scheduler configured"):
        scheduler_clusters_select("c-none")
    with pytest.raises(SchedulerSyncError, match=r"Unknown cluster 'x' \(known: a-pods, b-slurm, c-none, d-kube\)"):
        scheduler_clusters_select("x")


def test_the_watermark_never_passes_the_time_of_the_read_nor_goes_back(records) -> None:
    cluster = ClusterFactory(scheduler="slurm_sacct")
    now = START + 2 * H + timedelta(minutes=5)
    scheduler_sync(cluster=cluster, start=START, end=START + 24 * H, now=now)
    cluster.refresh_from_db()
    assert cluster.scheduler_synced_through == now
    scheduler_sync(cluster=cluster, start=START, end=START + H, now=now)  # an earlier window read again
    cluster.refresh_from_db()
    assert cluster.scheduler_synced_through == now


def test_a_running_job_read_again_derives_only_the_hours_since_its_last_read(records, derived) -> None:
    # given a running job's record, read a first time at 10:30
    cluster = ClusterFactory(scheduler="slurm_sacct")
    records.append(_record())
    first_read = START + 2 * H + timedelta(minutes=30)
    scheduler_sync(cluster=cluster, start=START, end=first_read, now=first_read)
    job = Job.objects.get(job_key="slurm/42")
    assert derived == [(Scope.jobs([job.pk]), {Fact.SCHEDULER})]  # a new record: the job's whole span
    # when it is read again, unchanged, at 13:10
    derived.clear()
    second_read = START + 5 * H + timedelta(minutes=10)
    report = scheduler_sync(cluster=cluster, start=START, end=second_read, now=second_read)
    # then only the hours from its last read to this one are derived, for that job
    assert report.changed_job_ids == frozenset() and report.running_job_ids == {job.pk}
    since_last_read = Scope(
        cluster_ids=frozenset([cluster.pk]), start=START + 2 * H, end=START + 6 * H, job_ids=frozenset([job.pk])
    )
    assert derived == [(since_last_read, {Fact.SCHEDULER})]


def test_a_job_whose_record_ended_is_derived_whole_once_and_not_again(records, derived) -> None:
    cluster = ClusterFactory(scheduler="slurm_sacct")
    records.append(_record(end=START + 3 * H, state=JobState.COMPLETED))
    scheduler_sync(cluster=cluster, start=START, end=START + 4 * H, now=START + 4 * H)
    assert [changed for _, changed in derived] == [{Fact.SCHEDULER}]
    derived.clear()
    scheduler_sync(cluster=cluster, start=START, end=START + 5 * H, now=START + 5 * H)
    assert derived == []  # the same record again: nothing follows


def test_an_unreadable_scheduler_is_recorded_and_writes_nothing(monkeypatch, derived) -> None:
    cluster = ClusterFactory(scheduler="slurm_sacct", scheduler_synced_through=START)

    def unavailable(**kwargs: Any) -> list[SchedulerJob]:
        raise SchedulerUnavailable("cluster x: sacct: error: slurmdbd down")

    monkeypatch.setattr(scheduler, "scheduler_records_read", unavailable)
    with pytest.raises(SchedulerUnavailable):
        scheduler_sync(cluster=cluster, start=START, end=START + H, now=START + H)
    cluster.refresh_from_db()
    assert cluster.scheduler_status == "cluster x: sacct: error: slurmdbd down"
    assert cluster.scheduler_synced_through == START and derived == [] and not Job.objects.exists()


def test_a_database_that_cannot_be_reached_stops_the_catch_up_for_the_task_to_retry(monkeypatch) -> None:
    ClusterFactory(name="a", scheduler="slurm_sacct")
    ClusterFactory(name="b", scheduler="slurm_sacct")
    asked: list[str] = []

    def sync(*, cluster: Cluster, **kwargs: Any) -> Any:
        asked.append(cluster.name)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(scheduler, "scheduler_sync", sync)
    with pytest.raises(OperationalError):
        schedulers_catch_up(now=START)
    assert asked == ["a"]
    assert Cluster.objects.get(name="a").scheduler_status == ""  # not taken for the cluster's own fault


def test_a_window_is_cut_in_days_and_an_empty_one_is_no_window() -> None:
    assert sync_windows(START, START) == []
    assert sync_windows(START, START + H, step=timedelta(minutes=25)) == [
        (START, START + timedelta(minutes=25)),
        (START + timedelta(minutes=25), START + timedelta(minutes=50)),
        (START + timedelta(minutes=50), START + H),
    ]
