"""The scheduler sync without a running Slurm: sacct stood in for by scripts (the recorded 22.05 output, a
failure, broken JSON, a hang), slurmrestd by a small HTTP server, the catch-up's windows and the command."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import CommandError, call_command

from apps.fleet.models import Cluster, Team, TeamRule
from apps.jobs.models import Job, Source
from apps.jobs.states import FAILED_RUN_STATES, JobState
from apps.pipeline.scheduler import (
    SchedulerSyncError,
    scheduler_sync,
    schedulers_catch_up,
    sync_windows,
)
from apps.schedulers.sources import SchedulerUnavailable, sacct_arguments, sacct_time
from apps.schedulers.tasks import sync_schedulers_task
from tests.factories import ClusterFactory, JobFactory, TeamFactory

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
# The recorded jobs (tests/fixtures/slurm) ran 2026-12-01 00:03-00:05 UTC.
START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
END = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def fake_sacct(tmp_path: Path, body: str, name: str = "sacct") -> str:
    """An executable that stands in for sacct; it logs its arguments, one run a line, to <name>.log."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / name}.log\n{body}\n')
    path.chmod(0o755)
    return str(path)


def recorded_sacct(tmp_path: Path) -> str:
    """Prints the recorded 22.05 output: the JSON document, or the parsable table with its exit codes."""
    return fake_sacct(
        tmp_path,
        f'case "$*" in *--json*) cat {FIXTURES / "sacct-json-22.05.json"};; '
        f"*) cat {FIXTURES / 'sacct-parsable-22.05.txt'};; esac",
    )


def empty_sacct(tmp_path: Path) -> str:
    return fake_sacct(tmp_path, 'case "$*" in *--json*) echo \'{"meta": {}, "errors": [], "jobs": []}\';; esac')


@pytest.fixture
def team() -> Team:
    team = TeamFactory(name="research")
    TeamRule.objects.create(team=team, kind=TeamRule.Kind.SLURM_ACCOUNT, value="fwteam")
    return team


def _rows(cluster: Cluster) -> list[dict[str, Any]]:
    return list(Job.objects.filter(cluster=cluster).order_by("job_key").values())


# --- the vocabulary ----------------------------------------------------------------------------------------


def test_failed_runs_are_the_job_s_own_failures_and_the_cluster_s() -> None:
    assert {s.value for s in FAILED_RUN_STATES} == {"failed", "timeout", "out_of_memory", "node_fail"}
    assert JobState.TIMEOUT.is_failed_run and not JobState.CANCELLED.is_failed_run
    assert all(s.value == s.value.lower() and s.info.meaning for s in JobState)


# --- sacct's arguments ---------------------------------------------------------------------------------------


def test_sacct_is_asked_for_every_user_s_jobs_of_the_window_in_utc() -> None:
    json_args, parsable_args = sacct_arguments(start=START, end=END + timedelta(minutes=30, seconds=5))
    assert json_args == ["--json", "-a", "-S", "2026-12-01T00:00:00", "-E", "2026-12-01T01:30:05"]
    assert parsable_args[:5] == ["--parsable2", "--noheader", "-X", "-o", "JobIDRaw,ExitCode"]
    assert "-a" in parsable_args
    # an offset is turned into UTC wall-clock time, as sacct reads it under TZ=UTC
    assert sacct_time(datetime.fromisoformat("2026-12-01T02:00:00+02:00")) == "2026-12-01T00:00:00"


# --- writing the records ---------------------------------------------------------------------------------------


def test_recorded_jobs_are_created_with_their_state_and_team(tmp_path: Path, team: Team) -> None:
    # given a cluster whose sacct prints the recorded 22.05 output
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=recorded_sacct(tmp_path))

    # when its window is synced
    report = scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)

    # then each recorded job is a job of the scheduler, charged by the account rule
    jobs = {j.job_id: j for j in Job.objects.filter(cluster=cluster)}
    assert report.created == len(jobs) == 9 and report.job_ids == {j.pk for j in jobs.values()}
    assert {j.source for j in jobs.values()} == {Source.SCHEDULER}
    assert {j.team for j in jobs.values()} == {team}
    assert jobs["1"].state == JobState.TIMEOUT
    assert (jobs["3"].state, jobs["3"].exit_code, jobs["3"].signal) == (JobState.FAILED, 3, 0)  # from parsable
    assert (jobs["2"].state, jobs["2"].exit_code, jobs["2"].gpus_requested, jobs["2"].gpus_allocated) == (
        JobState.COMPLETED,
        0,
        2,
        2,
    )
    assert jobs["4"].state == JobState.CANCELLED and jobs["4"].gpus_allocated == 0 and jobs["4"].node_list == ""
    assert {jobs[i].display_id for i in ("6", "8", "9")} == {"6_2", "6_0", "6_1"}
    assert jobs["2"].start == jobs["2"].scheduler_start and jobs["2"].end == jobs["2"].scheduler_end
    assert jobs["2"].submitted_at <= jobs["2"].start < jobs["2"].end
    assert (jobs["2"].partition, jobs["2"].qos, jobs["2"].node_list, jobs["2"].user) == ("gpu", "normal", "vm", "root")
    # the watermark moved, the status is clear
    cluster.refresh_from_db()
    assert cluster.scheduler_synced_through == END and cluster.scheduler_status == ""


def test_the_agent_s_jobs_keep_their_identity_and_team_and_unknown_ones_are_marked_missing(
    tmp_path: Path, team: Team
) -> None:
    # given the agent's jobs: one Slurm has (raw id 2), one it never had, and one outside the window
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=recorded_sacct(tmp_path))
    other = TeamFactory(name="other")
    at = START + timedelta(minutes=3)
    seen = JobFactory(cluster=cluster, team=other, job_id="2", account="x", start=at, last_seen=at, end=at)
    ghost = JobFactory(cluster=cluster, team=other, job_id="999999", start=at, last_seen=at, end=at)
    before = START - timedelta(days=2)
    old = JobFactory(cluster=cluster, team=other, job_id="999998", start=before, last_seen=before, end=before)

    # when the whole window is synced
    report = scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)

    # then the known job has Slurm's facts and keeps the agent's word, the unknown one is missing
    seen.refresh_from_db(), ghost.refresh_from_db(), old.refresh_from_db()
    assert (seen.state, seen.gpus_allocated, seen.source, seen.team, seen.account) == (
        JobState.COMPLETED,
        2,
        Source.AGENT,
        other,
        "x",
    )
    assert not seen.scheduler_missing and seen.scheduler_seen_at is not None
    assert ghost.scheduler_missing and ghost.state == JobState.UNKNOWN and ghost.scheduler_seen_at is None
    assert not old.scheduler_missing  # not seen in the window: the window says nothing of it
    assert report.missing == 1 and ghost.pk in report.job_ids and report.updated == 1


def test_a_second_sync_changes_nothing(tmp_path: Path, team: Team) -> None:
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=recorded_sacct(tmp_path))
    scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    first = _rows(cluster)

    again = scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)

    assert again.created == 0 and again.updated == 9
    second = _rows(cluster)
    for row in (*first, *second):
        row.pop("scheduler_seen_at")
    assert second == first


# --- a scheduler that cannot be read ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('echo "sacct: error: Problem talking to the database: Connection refused" >&2; exit 1', "exited 1"),
        ("echo '{\"jobs\": ['", "not JSON"),
        ('case "$*" in *--json*) echo \'{"jobs": []}\';; *) echo "1|not-a-code";; esac', "ExitCode is not N:S"),
    ],
    ids=["exits-1", "broken-json", "broken-parsable"],
)
def test_a_failing_sacct_is_recorded_and_writes_nothing(tmp_path: Path, body: str, said: str) -> None:
    # given a cluster synced before, and one job of the agent's
    mark = START - timedelta(hours=1)
    cluster = ClusterFactory(
        name="gpu-a", scheduler="slurm_sacct", sacct_command=fake_sacct(tmp_path, body), scheduler_synced_through=mark
    )
    job = JobFactory(cluster=cluster, start=START, last_seen=START, end=START)
    rows = _rows(cluster)

    # when its sacct fails
    with pytest.raises(SchedulerUnavailable) as failed:
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)

    # then the error is one line naming the cluster, kept on the cluster; nothing else moved
    message = str(failed.value)
    assert "\n" not in message and message.startswith("cluster gpu-a: ") and said in message
    cluster.refresh_from_db()
    assert cluster.scheduler_status == message
    assert cluster.scheduler_synced_through == mark
    assert _rows(cluster) == rows and not Job.objects.get(pk=job.pk).scheduler_missing


def test_a_missing_or_hanging_sacct_is_named(tmp_path: Path, settings: Any) -> None:
    cluster = ClusterFactory(name="gpu-b", scheduler="slurm_sacct", sacct_command=str(tmp_path / "no-sacct"))
    with pytest.raises(SchedulerUnavailable, match=r"cluster gpu-b: .*command not found"):
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)

    settings.FLEETWATT_SCHEDULER_TIMEOUT_S = 0.5
    cluster.sacct_command = fake_sacct(tmp_path, "exec sleep 5")
    with pytest.raises(SchedulerUnavailable, match=r"no answer within 0.5 s"):
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    cluster.refresh_from_db()
    assert "no answer" in cluster.scheduler_status and cluster.scheduler_synced_through is None


def test_a_good_sync_clears_the_last_error(tmp_path: Path) -> None:
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=empty_sacct(tmp_path), scheduler_status="old")
    scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    cluster.refresh_from_db()
    assert cluster.scheduler_status == "" and cluster.scheduler_synced_through == END


def test_a_window_must_be_a_window(tmp_path: Path) -> None:
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=empty_sacct(tmp_path))
    with pytest.raises(SchedulerSyncError):
        scheduler_sync(cluster=cluster, start=END, end=START)
    with pytest.raises(SchedulerSyncError):
        scheduler_sync(cluster=cluster, start=START.replace(tzinfo=None), end=END)


# --- beat's catch-up -------------------------------------------------------------------------------------------


def test_windows_are_a_day_at_most() -> None:
    windows = sync_windows(START, START + timedelta(days=2, hours=3))
    assert [(b - a) for a, b in windows] == [timedelta(days=1), timedelta(days=1), timedelta(hours=3)]
    assert windows[0][0] == START and windows[-1][1] == START + timedelta(days=2, hours=3)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))


def test_catch_up_re_reads_the_look_back_and_goes_on_past_a_failing_cluster(tmp_path: Path, settings: Any) -> None:
    # given a synced cluster, a new one, a failing one and one without a scheduler
    settings.FLEETWATT_SCHEDULER_LOOKBACK_H = 48
    mark = NOW - timedelta(hours=2)
    synced = ClusterFactory(
        name="a-synced", scheduler="slurm_sacct", sacct_command=empty_sacct(tmp_path), scheduler_synced_through=mark
    )
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    new = ClusterFactory(name="b-new", scheduler="slurm_sacct", sacct_command=empty_sacct(new_dir))
    failing = ClusterFactory(
        name="c-failing", scheduler="slurm_sacct", sacct_command=fake_sacct(tmp_path, "exit 2", name="failing")
    )
    ClusterFactory(name="d-none", sacct_command=fake_sacct(tmp_path, "exit 2", name="never"))

    # when beat's catch-up runs
    reports = schedulers_catch_up(now=NOW)

    # then the synced cluster re-read 48 h before its watermark, in days; the new one the last 24 h
    runs = (tmp_path / "sacct.log").read_text().splitlines()
    json_runs = [line.split() for line in runs if "--json" in line]
    assert [(r[3], r[5]) for r in json_runs] == [
        ("2026-12-01T10:00:00", "2026-12-02T10:00:00"),
        ("2026-12-02T10:00:00", "2026-12-03T10:00:00"),
        ("2026-12-03T10:00:00", "2026-12-03T12:00:00"),
    ]
    new_runs = [line.split() for line in (new_dir / "sacct.log").read_text().splitlines() if "--json" in line]
    assert [(r[3], r[5]) for r in new_runs] == [("2026-12-02T12:00:00", "2026-12-03T12:00:00")]
    assert [r.cluster for r in reports] == ["a-synced"] * 3 + ["b-new"]
    for cluster in (synced, new, failing):
        cluster.refresh_from_db()
    assert synced.scheduler_synced_through == NOW and new.scheduler_synced_through == NOW
    # the failing one is recorded and left where it was; the one without a scheduler was never asked
    assert failing.scheduler_synced_through is None and "exited 2" in failing.scheduler_status
    assert not (tmp_path / "never.log").exists()


def test_the_beat_task_is_scheduled_and_runs_the_catch_up(tmp_path: Path, settings: Any) -> None:
    from fleetwatt import settings as project_settings

    entry = project_settings.CELERY_BEAT_SCHEDULE["sync-schedulers"]
    assert entry["task"] == "apps.schedulers.tasks.sync_schedulers_task"
    ClusterFactory(scheduler="slurm_sacct", sacct_command=empty_sacct(tmp_path))
    assert sync_schedulers_task.apply().get() == 1  # the first sync: one window of 24 h


# --- the command -----------------------------------------------------------------------------------------------


def test_the_command_syncs_a_cluster_and_says_what_went_wrong(tmp_path: Path, team: Team) -> None:
    cluster = ClusterFactory(name="gpu-c", scheduler="slurm_sacct", sacct_command=recorded_sacct(tmp_path))
    call_command(
        "sync_scheduler", "--cluster", "gpu-c", "--start", "2026-12-01T00:00:00Z", "--end", "2026-12-01T01:00Z"
    )
    assert Job.objects.filter(cluster=cluster, source=Source.SCHEDULER).count() == 9

    with pytest.raises(CommandError, match=r"Unknown cluster 'nope'"):
        call_command(
            "sync_scheduler", "--cluster", "nope", "--start", "2026-12-01T00:00Z", "--end", "2026-12-01T01:00Z"
        )
    ClusterFactory(name="plain")
    with pytest.raises(CommandError, match=r"no scheduler configured"):
        call_command(
            "sync_scheduler", "--cluster", "plain", "--start", "2026-12-01T00:00Z", "--end", "2026-12-01T01:00Z"
        )
    with pytest.raises(CommandError, match=r"no time zone"):
        call_command(
            "sync_scheduler", "--cluster", "gpu-c", "--start", "2026-12-01T00:00", "--end", "2026-12-01T01:00Z"
        )
    with pytest.raises(CommandError, match=r"must be before"):
        call_command(
            "sync_scheduler", "--cluster", "gpu-c", "--start", "2026-12-02T00:00Z", "--end", "2026-12-01T01:00Z"
        )
    cluster.sacct_command = fake_sacct(tmp_path, "echo 'sacct: error: Slurmdbd is down' >&2; exit 1", name="down")
    cluster.save()
    with pytest.raises(CommandError, match=r"cluster gpu-c: .*exited 1: sacct: error: Slurmdbd is down"):
        call_command(
            "sync_scheduler", "--cluster", "gpu-c", "--start", "2026-12-01T00:00Z", "--end", "2026-12-01T01:00Z"
        )


# --- slurmrestd ------------------------------------------------------------------------------------------------


class FakeSlurmrestd(BaseHTTPRequestHandler):
    """Answers GET /slurmdb/v0.0.38/jobs with the recorded document when the token is right."""

    token = "jwt-for-tests"
    requests: list[dict[str, Any]] = []

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.requests.append({"path": url.path, "query": parse_qs(url.query), "headers": dict(self.headers)})
        if url.path != "/slurmdb/v0.0.38/jobs":
            self._answer(404, {"errors": [{"error": "not found"}]})
        elif self.headers.get("X-SLURM-USER-TOKEN") != self.token:
            self._answer(401, {"errors": [{"error": "Authentication failure"}]})
        else:
            self._answer(200, json.loads((FIXTURES / "sacct-json-22.05.json").read_text()))

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def slurmrestd() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeSlurmrestd)
    FakeSlurmrestd.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_slurmrestd_is_read_with_the_token_from_the_named_variable(
    slurmrestd: str, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a cluster whose accounting is slurmrestd, its token in the worker's environment
    monkeypatch.setenv("FW_TEST_SLURM_JWT", FakeSlurmrestd.token)
    cluster = ClusterFactory(
        scheduler="slurm_rest",
        slurmrest_url=slurmrestd + "/",
        slurmrest_token_env="FW_TEST_SLURM_JWT",
        slurmrest_user="fw",
    )

    # when synced
    report = scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)

    # then the jobs are stored as from sacct (a failed job's exit code unknown: 22.05's JSON does not say it)
    jobs = {j.job_id: j for j in Job.objects.filter(cluster=cluster)}
    assert report.created == 9 and jobs["2"].state == JobState.COMPLETED and jobs["2"].gpus_allocated == 2
    assert (jobs["3"].state, jobs["3"].exit_code) == (JobState.FAILED, None)
    (asked,) = FakeSlurmrestd.requests
    assert asked["headers"]["X-SLURM-USER-TOKEN"] == FakeSlurmrestd.token
    assert asked["headers"]["X-SLURM-USER-NAME"] == "fw"
    # times relative to slurmrestd's now, which reads the same in any time zone
    start_s, end_s = (int(asked["query"][k][0].removeprefix("now")) for k in ("start_time", "end_time"))
    assert asked["query"]["start_time"][0].startswith("now-") and end_s - start_s == 3600
    assert FakeSlurmrestd.token not in json.dumps(list(Cluster.objects.values()), default=str)


def test_slurmrestd_refusing_or_no_token_is_recorded(slurmrestd: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ClusterFactory(
        name="gpu-r", scheduler="slurm_rest", slurmrest_url=slurmrestd, slurmrest_token_env="FW_TEST_SLURM_JWT"
    )
    monkeypatch.delenv("FW_TEST_SLURM_JWT", raising=False)
    with pytest.raises(SchedulerUnavailable, match=r"FW_TEST_SLURM_JWT .* is not set"):
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    monkeypatch.setenv("FW_TEST_SLURM_JWT", "wrong")
    with pytest.raises(SchedulerUnavailable, match=r"cluster gpu-r: GET .* HTTP 401"):
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    cluster.refresh_from_db()
    assert "HTTP 401" in cluster.scheduler_status and not Job.objects.filter(cluster=cluster).exists()
    cluster.slurmrest_url = "http://127.0.0.1:9"
    with pytest.raises(SchedulerUnavailable, match=r"cluster gpu-r: GET http://127.0.0.1:9/slurmdb"):
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
