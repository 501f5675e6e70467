"""The scheduler sync against the real local Slurm (docs/schedulers.md): jobs asking for GPUs that complete,
exit 3, are cancelled, or run as an array, read back by `scheduler_sync` through the real sacct.

The 70-second TIMEOUT job of the fixtures is left out (Slurm checks time limits every 30 s); the recorded
TIMEOUT job is synced in test_sync.py from tests/fixtures/slurm."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.fleet.models import Cluster, Team, TeamRule
from apps.jobs.models import Job, Source
from apps.jobs.states import JobState
from apps.pipeline.scheduler import scheduler_sync
from tests.factories import ClusterFactory, JobFactory, TeamFactory

from .conftest import FINAL_STATES, LocalSlurm

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

NEVER_A_SLURM_ID = "987654321"


@dataclass(frozen=True)
class Submitted:
    ok: int
    fails: int
    cancelled: int
    array: int
    array_tasks: dict[int, int]  # task id -> raw job id
    start: datetime  # a window around them
    end: datetime


def _whole(record: dict[str, Any]) -> bool:
    """Final, and slurmdbd's own record rather than its stand-in (conftest.record_final)."""
    return bool(record["state"]["current"] in FINAL_STATES and record["time"]["end"] and record["partition"])


def _wait_running(slurm: LocalSlurm, job_id: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while slurm.run("squeue", "-h", "-j", str(job_id), "-o", "%T").strip() != "RUNNING":
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} did not start within {timeout}s")
        time.sleep(0.2)


def _wait_accounted(slurm: LocalSlurm, jobs: list[int], array: int, tasks: int, timeout: float = 60) -> dict[int, int]:
    """Poll sacct until every job's and every array task's record is whole; the array's {task id: raw id}."""
    deadline = time.monotonic() + timeout
    while True:
        records = slurm.sacct_json(*jobs, array)["jobs"]
        by_id = {r["job_id"]: r for r in records}
        in_array = [r for r in records if r["array"]["job_id"] == array and r["array"]["task_id"] is not None]
        if (
            all(j in by_id and _whole(by_id[j]) for j in jobs)
            and len(in_array) == tasks
            and all(_whole(r) for r in in_array)
        ):
            return {r["array"]["task_id"]: r["job_id"] for r in in_array}
        if time.monotonic() > deadline:
            pytest.fail(f"jobs not accounted after {timeout}s: {[(r['job_id'], r['state']) for r in records]}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def submitted(local_slurm: LocalSlurm) -> Submitted:
    """Four submissions of a second or two, read back once all are accounted."""
    start = datetime.fromtimestamp(math.floor(time.time()) - 1, tz=UTC)
    ok = local_slurm.sbatch("-J", "fw-sync-ok", "--gres=gpu:2", "--wrap", "sleep 1")
    fails = local_slurm.sbatch("-J", "fw-sync-fails", "--gres=gpu:1", "--wrap", "sleep 1; exit 3")
    cancelled = local_slurm.sbatch("-J", "fw-sync-cancel", "--gres=gpu:1", "--wrap", "sleep 60")
    array = local_slurm.sbatch("-J", "fw-sync-array", "--array=0-2", "--gres=gpu:1", "--wrap", "sleep 1")
    _wait_running(local_slurm, cancelled)
    local_slurm.run("scancel", str(cancelled))
    tasks = _wait_accounted(local_slurm, [ok, fails, cancelled], array, 3)
    end = datetime.fromtimestamp(math.ceil(time.time()) + 1, tz=UTC)
    return Submitted(ok, fails, cancelled, array, tasks, start, end)


@pytest.fixture
def cluster(local_slurm: LocalSlurm, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """A cluster read with the plain `sacct`, in the worker's environment (SLURM_CONF, as a worker has it)."""
    monkeypatch.setenv("SLURM_CONF", local_slurm.env["SLURM_CONF"])
    return ClusterFactory(name="fwlocal", scheduler="slurm_sacct", sacct_command="sacct")


@pytest.fixture
def team(local_slurm: LocalSlurm) -> Team:
    team = TeamFactory(name="fw-research")
    TeamRule.objects.create(
        team=team, kind=TeamRule.Kind.SLURM_ACCOUNT, value=local_slurm.env["FLEETWATT_SLURM_ACCOUNT"]
    )
    return team


def _job(cluster: Cluster, raw_id: int) -> Job:
    return Job.objects.get(cluster=cluster, job_key=f"slurm/{raw_id}")


def test_real_jobs_get_their_scheduler_records(
    submitted: Submitted, cluster: Cluster, team: Team, local_slurm: LocalSlurm
) -> None:
    # when the window around the submissions is synced
    report = scheduler_sync(cluster=cluster, start=submitted.start, end=submitted.end)

    # then each job exists, made from its record (no agent saw them), charged by the rule on its account
    ok, fails, cancelled = (_job(cluster, i) for i in (submitted.ok, submitted.fails, submitted.cancelled))
    tasks = {task: _job(cluster, raw) for task, raw in submitted.array_tasks.items()}
    mine = [ok, fails, cancelled, *tasks.values()]
    assert {j.pk for j in mine} <= report.job_ids
    for job in mine:
        assert (job.source, job.team, job.scheduler) == (Source.SCHEDULER, team, "slurm")
        assert job.account == local_slurm.env["FLEETWATT_SLURM_ACCOUNT"]
        assert job.partition == local_slurm.env["FLEETWATT_SLURM_PARTITION"]
        assert job.user and job.qos and job.scheduler_seen_at is not None and not job.scheduler_missing
        assert submitted.start <= job.submitted_at <= job.scheduler_start <= job.scheduler_end <= submitted.end
        assert (job.start, job.end, job.last_seen) == (job.scheduler_start, job.scheduler_end, job.scheduler_end)

    assert (ok.name, ok.state, ok.exit_code, ok.signal) == ("fw-sync-ok", JobState.COMPLETED, 0, 0)
    assert (ok.gpus_requested, ok.gpus_allocated, ok.display_id) == (2, 2, str(submitted.ok))
    assert ok.node_list and "," not in ok.node_list  # the one node
    # exit 3: FAILED in the JSON, whose 22.05 writer says "SUCCESS, 0"; the 3 comes from the parsable output
    assert (fails.state, fails.exit_code, fails.signal) == (JobState.FAILED, 3, 0)
    assert (fails.gpus_requested, fails.gpus_allocated) == (1, 1)
    assert JobState(fails.state).is_failed_run
    # cancelled while running: the job's own ExitCode is what sacct says of the job (0:0 on 22.05; its batch
    # step, killed by SIGTERM, reads 0:15)
    said = local_slurm.run("sacct", "-a", "-X", "-n", "-P", "-o", "ExitCode", "-j", str(submitted.cancelled))
    assert cancelled.state == JobState.CANCELLED and not JobState(cancelled.state).is_failed_run
    assert f"{cancelled.exit_code or 0}:{cancelled.signal}" == said.strip()
    assert cancelled.gpus_allocated == 1
    # the array: one job per task, each its own allocation, named as squeue names them
    assert {t: j.display_id for t, j in tasks.items()} == {t: f"{submitted.array}_{t}" for t in (0, 1, 2)}
    assert {(j.state, j.exit_code, j.gpus_allocated) for j in tasks.values()} == {(JobState.COMPLETED, 0, 1)}
    assert submitted.array in submitted.array_tasks.values()  # the array's own id is one task's raw id

    cluster.refresh_from_db()
    assert cluster.scheduler_status == ""
    # the window ends a second ahead: the watermark stops at the time of the read
    assert submitted.start < cluster.scheduler_synced_through < submitted.end


def test_syncing_again_changes_nothing(submitted: Submitted, cluster: Cluster, team: Team) -> None:
    # given a synced window
    scheduler_sync(cluster=cluster, start=submitted.start, end=submitted.end)
    before = list(Job.objects.filter(cluster=cluster).order_by("job_key").values())

    # when it is synced again
    again = scheduler_sync(cluster=cluster, start=submitted.start, end=submitted.end)

    # then the rows are the same (only the time a record last described them moved)
    after = list(Job.objects.filter(cluster=cluster).order_by("job_key").values())
    assert again.created == 0 and len(after) == len(before)
    for row in (*before, *after):
        row.pop("scheduler_seen_at")
    assert after == before


def test_a_job_slurm_never_had_is_marked_missing(submitted: Submitted, cluster: Cluster, team: Team) -> None:
    # given two jobs the agent saw in the window, as the ingest writes them: one Slurm ran, one it never had
    unassigned = TeamFactory(name=Team.UNASSIGNED)
    seen_at = submitted.start + timedelta(seconds=1)
    known = JobFactory(
        cluster=cluster, team=unassigned, job_id=str(submitted.ok), start=seen_at, last_seen=seen_at, end=None
    )
    ghost = JobFactory(
        cluster=cluster, team=unassigned, job_id=NEVER_A_SLURM_ID, start=seen_at, last_seen=seen_at, end=None
    )
    assert known.source == ghost.source == Source.AGENT and ghost.state == JobState.UNKNOWN

    # when the whole window is synced
    report = scheduler_sync(cluster=cluster, start=submitted.start, end=submitted.end)

    # then the one Slurm ran has its record and keeps the agent's team; the other is missing, nothing deleted
    known.refresh_from_db(), ghost.refresh_from_db()
    assert (known.state, known.gpus_allocated, known.source, known.team) == (
        JobState.COMPLETED,
        2,
        Source.AGENT,
        unassigned,
    )
    assert not known.scheduler_missing
    assert ghost.scheduler_missing and ghost.state == JobState.UNKNOWN and ghost.pk in report.job_ids


def test_a_window_with_no_jobs_is_synced_as_empty(cluster: Cluster) -> None:
    # the real sacct answers a quiet window with error 9003 "Nothing found": the sync goes on, its watermark too
    start = datetime(2020, 1, 1, tzinfo=UTC)
    report = scheduler_sync(cluster=cluster, start=start, end=start + timedelta(days=1), now=start + timedelta(days=2))
    cluster.refresh_from_db()
    assert (report.records, cluster.scheduler_status) == (0, "")
    assert cluster.scheduler_synced_through == start + timedelta(days=1)
