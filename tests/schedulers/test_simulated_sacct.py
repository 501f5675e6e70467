"""The scheduler sync reading the demo's simulated Slurm accounting (`manage.py simulate_sacct` as the cluster's
`sacct_command`, run as a process with TZ=UTC like a real sacct): every scenario job gets its state, exit code,
allocation and span; the agent's jobs are matched, none is missing; failed runs become findings."""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from apps.fleet.models import Team, TeamRule
from apps.jobs.models import Job, Source
from apps.jobs.states import JobState
from apps.pipeline.scheduler import scheduler_sync, sync_windows
from apps.waste.models import Flag
from tests.factories import ClusterFactory, JobFactory, TeamFactory

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 2, tzinfo=UTC)
SCENARIO = {
    "name": "states",
    "start": "2026-01-01T00:00:00Z",  # moved by --scenario-start, as the demo moves `now-7d`
    "duration": "2d",
    "nodes": [{"hostname": "gpu-a01", "gpus": 8}, {"hostname": "gpu-a02", "gpus": 8}],
    "jobs": [
        {"scheduler": "slurm", "job_id": "501", "node": "gpu-a01", "gpus": [0, 1], "start": "1h", "end": "5h",
         "user": "ada", "account": "vision", "name": "train-a"},
        {"scheduler": "slurm", "job_id": "502", "node": "gpu-a01", "gpus": [2], "start": "2h", "end": "3h",
         "user": "ada", "account": "vision", "name": "sweep-1", "state": "failed", "exit_code": 4},
        {"scheduler": "slurm", "job_id": "503", "node": "gpu-a01", "gpus": [3], "start": "20h", "end": "30h",
         "user": "bob", "account": "nlp", "name": "sweep-2", "state": "timeout", "partition": "long"},
        {"scheduler": "slurm", "job_id": "504", "node": "gpu-a02", "gpus": [0, 1, 2, 3], "start": "23h",
         "end": "25h", "user": "bob", "account": "nlp", "name": "pretrain", "state": "out_of_memory",
         "gpus_requested": 4, "qos": "high"},
        {"scheduler": "slurm", "job_id": "505", "node": "gpu-a02", "gpus": [4], "start": "26h", "end": "27h",
         "user": "bob", "account": "nlp", "name": "eval", "state": "cancelled"},
        {"scheduler": "slurm", "job_id": "506", "node": "gpu-a02", "gpus": [5], "start": "30h", "end": "31h",
         "user": "bob", "account": "nlp", "name": "eval-2", "state": "node_fail"},
        {"scheduler": "slurm", "job_id": "507", "node": "gpu-a02", "gpus": [6], "start": "40h", "end": "2d",
         "user": "bob", "account": "nlp", "name": "serve"},  # still running at the scenario's end
        {"scheduler": "k8s", "namespace": "search", "pod": "p1", "node": "gpu-a02", "gpus": [7], "start": 0,
         "end": "1h"},
    ],
}  # fmt: skip
EXPECTED = {  # job id: state, exit code, signal, GPUs requested and allocated, nodes
    "501": (JobState.COMPLETED, 0, 0, 2, 2, "gpu-a01"),
    "502": (JobState.FAILED, 4, 0, 1, 1, "gpu-a01"),
    "503": (JobState.TIMEOUT, 0, 0, 1, 1, "gpu-a01"),
    "504": (JobState.OUT_OF_MEMORY, None, 125, 4, 4, "gpu-a02"),
    "505": (JobState.CANCELLED, 0, 0, 1, 1, "gpu-a02"),
    "506": (JobState.NODE_FAIL, 0, 0, 1, 1, "gpu-a02"),
    "507": (JobState.RUNNING, None, None, 1, 1, "gpu-a02"),
}


@pytest.fixture
def simulated_cluster(tmp_path: Path):
    """A cluster whose sacct is the simulated one of SCENARIO, anchored at T0 (as demo_setup configures the
    demo's), with its accounts' teams."""
    path = tmp_path / "states.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    command = [sys.executable, str(ROOT / "manage.py"), "simulate_sacct", "--scenario", str(path)]
    command += ["--scenario-start", T0.isoformat()]
    for name in ("vision", "nlp"):
        TeamRule.objects.create(team=TeamFactory(name=name), kind=TeamRule.Kind.SLURM_ACCOUNT, value=name)
    return ClusterFactory(name="demo", scheduler="slurm_sacct", sacct_command=shlex.join(command))


def test_every_scenario_job_is_stored_with_its_record(simulated_cluster) -> None:
    # given the agent's view of two of the jobs (as the ingest leaves them), and a job Slurm never had
    cluster = simulated_cluster
    vision = Team.objects.get(name="vision")
    seen = JobFactory(cluster=cluster, team=vision, job_key="slurm/501", job_id="501", start=T0 + timedelta(hours=1),
                      last_seen=T0 + timedelta(hours=5), end=T0 + timedelta(hours=5))  # fmt: skip
    ghost = JobFactory(cluster=cluster, team=vision, job_key="slurm/999", job_id="999", start=T0 + timedelta(hours=2),
                       last_seen=T0 + timedelta(hours=3), end=T0 + timedelta(hours=3))  # fmt: skip

    # when the scenario's two days are synced, a day a window
    reports = [scheduler_sync(cluster=cluster, start=a, end=b) for a, b in sync_windows(T0, T0 + timedelta(days=2))]

    # then every Slurm job of the scenario is stored with its state, exit, allocation and span
    jobs = {j.job_id: j for j in Job.objects.filter(cluster=cluster).exclude(pk=ghost.pk)}
    assert set(jobs) == set(EXPECTED)
    for job_id, (state, code, signal, requested, allocated, nodes) in EXPECTED.items():
        job = jobs[job_id]
        assert (job.state, job.exit_code, job.signal) == (state, code, signal), job_id
        assert (job.gpus_requested, job.gpus_allocated, job.node_list) == (requested, allocated, nodes), job_id
    assert (jobs["503"].partition, jobs["504"].qos, jobs["501"].display_id) == ("long", "high", "501")
    assert jobs["504"].scheduler_start == T0 + timedelta(hours=23)
    assert jobs["504"].scheduler_end == T0 + timedelta(hours=25)
    assert jobs["504"].submitted_at == T0 + timedelta(hours=23, minutes=-1)
    assert jobs["507"].scheduler_end is None  # still running
    # the agent's job keeps its identity; the ones only Slurm had are created, charged by the account rules
    assert jobs["501"].pk == seen.pk and jobs["501"].source == Source.AGENT
    assert {jobs[i].source for i in ("502", "503", "504")} == {Source.SCHEDULER}
    assert jobs["504"].team.name == "nlp"
    # the accounting covers the agent's job; the one Slurm never had is missing
    ghost.refresh_from_db()
    assert not jobs["501"].scheduler_missing and ghost.scheduler_missing
    assert sum(r.missing for r in reports) == 1
    # failed runs (failed, timeout, out of memory, node failure) are findings; cancelled and completed are not
    failed = set(Flag.objects.filter(kind=Flag.Kind.FAILED_RUN).values_list("job__job_id", flat=True))
    assert failed == {"502", "503", "504", "506"}
    cluster.refresh_from_db()
    assert cluster.scheduler_status == "" and cluster.scheduler_synced_through is not None


def test_a_window_reads_only_its_jobs_and_a_second_read_changes_nothing(simulated_cluster) -> None:
    # given the hours 22-24 of the first day: the timeout (20-30 h) and the OOM (23-25 h) ran in it
    cluster = simulated_cluster
    start, end = T0 + timedelta(hours=22), T0 + timedelta(hours=24)
    # when read twice
    first = scheduler_sync(cluster=cluster, start=start, end=end)
    again = scheduler_sync(cluster=cluster, start=start, end=end)
    # then the window's jobs alone, and the second read wrote the same
    assert set(Job.objects.filter(cluster=cluster).values_list("job_id", flat=True)) == {"503", "504"}
    assert (first.records, first.created, again.created, again.updated) == (2, 2, 0, 2)
