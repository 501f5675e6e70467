"""Writes of the scheduler sync (apps/schedulers/services.py): a record stored on the agent's job (the scheduler's
fields only) or on a job only the scheduler knows (all of it, its team from the rules); the agent's jobs a complete
window does not name marked missing; what changed told apart from what was only read again; the watermark never
moving back. The sync through the pipeline: tests/schedulers/test_sync.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from apps.fleet.models import Cluster, TeamRule
from apps.fleet.selectors import TeamResolver
from apps.jobs.models import Job
from apps.schedulers.services import (
    cluster_sync_lock,
    scheduler_records_write,
    scheduler_status_record,
    scheduler_watermark_advance,
)
from apps.schedulers.slurm import JobState, SchedulerJob
from tests.factories import ClusterFactory, JobFactory, TeamFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 2, 10, tzinfo=UTC)
END = START + timedelta(hours=1)
SEEN = END + timedelta(minutes=5)


def _record(job_id: str, **fields: Any) -> SchedulerJob:
    base: dict[str, Any] = {
        "job_key": f"slurm/{job_id}", "job_id": job_id, "display_id": job_id, "user": "ada", "account": "vision",
        "partition": "gpu", "qos": "normal", "name": f"run-{job_id}", "state": JobState.COMPLETED,
        "state_raw": "COMPLETED", "exit_code": 0, "signal": 0, "submit": START, "start": START, "end": END,
        "gpus_requested": 2, "gpus_allocated": 2, "nodes": ("gpu01", "gpu02"), "gpu_indices": {"gpu01": (0, 1)},
    }  # fmt: skip
    return SchedulerJob(**{**base, **fields})


@pytest.fixture
def cluster() -> Cluster:
    return ClusterFactory(scheduler="slurm_sacct")


@pytest.fixture
def teams(cluster: Cluster) -> TeamResolver:
    vision = TeamFactory(name="vision")
    TeamRule.objects.create(kind="slurm_account", value="vision", team=vision)
    return TeamResolver(cluster=cluster, unassigned=TeamFactory(name="unassigned"))


def _write(cluster: Cluster, teams: TeamResolver, records: list[SchedulerJob], *, complete: bool = True, **kw: Any):
    args = {"window_complete": complete, "teams": teams, "start": START, "end": END, "seen_at": SEEN, **kw}
    return scheduler_records_write(cluster=cluster, records=records, **args)


def test_a_job_only_the_scheduler_knows_is_created_from_its_record(cluster: Cluster, teams: TeamResolver) -> None:
    report = _write(cluster, teams, [_record("7")])
    job = Job.objects.get(job_key="slurm/7")
    assert (job.source, job.team.name, job.user, job.name) == ("scheduler", "vision", "ada", "run-7")
    assert (job.state, job.start, job.end, job.last_seen) == ("completed", START, END, END)
    assert (job.node_list, job.gpu_indices, job.scheduler_seen_at) == ("gpu01,gpu02", {"gpu01": [0, 1]}, SEEN)
    assert (report.created, report.updated, report.missing) == (1, 0, 0)
    assert report.job_ids == report.changed_job_ids == {job.pk}


def test_the_agents_job_takes_the_schedulers_fields_and_keeps_its_own(cluster: Cluster, teams: TeamResolver) -> None:
    # given the agent's job, with its own name, user and team (an admin's choice)
    mine = TeamFactory(name="mine")
    agent = JobFactory(cluster=cluster, job_key="slurm/7", source="agent", name="agent-name", user="agent-user",
                       team=mine, team_locked=True, state="unknown")  # fmt: skip
    # when the scheduler's record of it is written
    report = _write(cluster, teams, [_record("7", state=JobState.FAILED, exit_code=3)])
    # then
    job = Job.objects.get(pk=agent.pk)
    assert (job.state, job.exit_code, job.partition, job.gpus_allocated) == ("failed", 3, "gpu", 2)
    assert (job.name, job.user, job.team, job.source) == ("agent-name", "agent-user", mine, "agent")
    assert (report.created, report.updated) == (0, 1)


def test_a_record_read_again_unchanged_derives_nothing_and_a_running_one_moves_on(
    cluster: Cluster, teams: TeamResolver
) -> None:
    running = _record("8", state=JobState.RUNNING, end=None, exit_code=None, signal=None)
    _write(cluster, teams, [_record("7"), running])
    later = SEEN + timedelta(hours=1)
    again = _write(cluster, teams, [_record("7"), running], seen_at=later)
    assert again.changed_job_ids == frozenset()
    assert again.running_job_ids == {Job.objects.get(job_key="slurm/8").pk}
    assert again.running_read_before == SEEN
    # and a record that says something new derives again
    third = _write(cluster, teams, [_record("7", exit_code=1, state=JobState.FAILED)], seen_at=later)
    assert third.changed_job_ids == {Job.objects.get(job_key="slurm/7").pk}


def test_slurmdbds_stand_in_is_left_for_the_next_read(cluster: Cluster, teams: TeamResolver) -> None:
    report = _write(cluster, teams, [_record("9", name="allocation", partition="")])
    assert not Job.objects.filter(job_key="slurm/9").exists()
    assert report.records == 1 and report.created == 0


def test_the_agents_jobs_a_complete_window_does_not_name_are_marked_missing(
    cluster: Cluster, teams: TeamResolver
) -> None:
    # given the agent's slurm jobs in the window (one named by the scheduler), one before it, and a pod
    named = JobFactory(cluster=cluster, job_key="slurm/7", start=START, last_seen=END)
    unnamed = JobFactory(cluster=cluster, job_key="slurm/70", start=START, last_seen=END)
    earlier = JobFactory(cluster=cluster, job_key="slurm/71", start=START - timedelta(days=2),
                         last_seen=START - timedelta(days=1))  # fmt: skip
    pod = JobFactory(cluster=cluster, job_key="k8s/ml/p", start=START, last_seen=END)
    elsewhere = JobFactory(job_key="slurm/72", start=START, last_seen=END)
    # when a window only partly read is written: nobody is missing
    assert _write(cluster, teams, [_record("7")], complete=False).missing == 0
    # when the whole window is
    report = _write(cluster, teams, [_record("7")])
    # then only the slurm job of this cluster in the window that no record names
    missing = set(Job.objects.filter(scheduler_missing=True).values_list("job_key", flat=True))
    assert missing == {"slurm/70"} and report.missing == 1
    assert unnamed.pk in report.changed_job_ids
    assert {named.pk, earlier.pk, pod.pk, elsewhere.pk}.isdisjoint(
        Job.objects.filter(scheduler_missing=True).values_list("pk", flat=True)
    )
    # and marked once: the next complete window changes nothing for it
    assert unnamed.pk not in _write(cluster, teams, [_record("7")]).changed_job_ids


def test_a_pod_the_agent_keyed_by_its_uid_is_not_missing() -> None:
    cluster = ClusterFactory(scheduler="kube_state_metrics")
    teams = TeamResolver(cluster=cluster, unassigned=TeamFactory(name="unassigned"))
    by_uid = JobFactory(cluster=cluster, job_key="k8s/pod-uid/abc", job_id="abc", start=START, last_seen=END)
    JobFactory(cluster=cluster, job_key="k8s/ml/gone", job_id="zzz", start=START, last_seen=END)
    pod = _record("abc", job_key="k8s/ml/p", scheduler="k8s", namespace="ml", pod="p", account="", user="")
    report = _write(cluster, teams, [pod])
    assert set(Job.objects.filter(scheduler_missing=True).values_list("job_key", flat=True)) == {"k8s/ml/gone"}
    assert Job.objects.get(pk=by_uid.pk).scheduler_missing is False and report.missing == 1


def test_the_last_record_of_a_key_wins(cluster: Cluster, teams: TeamResolver) -> None:
    first = _record("7", state=JobState.RUNNING, end=None)
    _write(cluster, teams, [first, replace(first, state=JobState.COMPLETED, end=END)])
    assert Job.objects.get(job_key="slurm/7").state == "completed"


def test_the_status_and_the_watermark_which_never_moves_back(cluster: Cluster) -> None:
    scheduler_status_record(cluster=cluster, status="sacct: exited 1")
    assert Cluster.objects.get(pk=cluster.pk).scheduler_status == cluster.scheduler_status == "sacct: exited 1"
    scheduler_watermark_advance(cluster=cluster, through=END)
    scheduler_watermark_advance(cluster=cluster, through=START)  # an older window read again
    assert cluster.scheduler_synced_through == END == Cluster.objects.get(pk=cluster.pk).scheduler_synced_through
    # the sync's lock: held by this transaction until it ends
    cluster_sync_lock(cluster=cluster)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s "
            "AND pid = pg_backend_pid() AND granted",
            [0x66770002, cluster.pk],
        )
        assert cursor.fetchone() == (1,)
