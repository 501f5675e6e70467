"""Reading a cluster's scheduler accounting (apps/schedulers/sources.py): sacct run as the worker runs it (its window
in UTC, its two reads), slurmrestd asked with its token, kube-state-metrics' series asked of the cluster's
Prometheus; whatever goes wrong, one line naming the cluster and nothing half read. Real sacct and sync end to end:
tests/schedulers/test_sync.py and test_local_slurm.py; the records' checks: tests/schedulers/test_records.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from apps.schedulers.slurm import JobState
from apps.schedulers.sources import (
    SLURMDB_JOBS_PATH,
    SchedulerUnavailable,
    kube_records_read,
    one_line,
    sacct_arguments,
    sacct_records_read,
    sacct_time,
    scheduler_records_read,
    slurmrest_records_read,
)
from tests.factories import ClusterFactory
from tests.json_server import JsonServer, json_server

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
START = datetime(2026, 11, 2, 10, tzinfo=UTC)
END = START + timedelta(hours=1)


def _record(job_id: int, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": job_id, "name": "train", "user": "ada", "account": "vision", "partition": "gpu",
        "state": {"current": ["COMPLETED"]}, "exit_code": {"status": ["SUCCESS"], "return_code": 0},
        "time": {"submission": int(START.timestamp()), "start": int(START.timestamp()), "end": int(END.timestamp())},
        "nodes": "gpu01", "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 1}]}, **fields,
    }  # fmt: skip


# sacct's arguments and messages


def test_sacct_reads_its_window_in_utc_wall_clock_time() -> None:
    berlin = timezone(timedelta(hours=1))
    assert sacct_time(START.astimezone(berlin)) == "2026-11-02T10:00:00"
    as_json, parsable = sacct_arguments(start=START, end=END)
    window = ["-a", "-S", "2026-11-02T10:00:00", "-E", "2026-11-02T11:00:00"]
    assert as_json == ["--json", *window]
    assert parsable == ["--parsable2", "--noheader", "-X", "-o", "JobIDRaw,ExitCode", *window]


def test_a_message_is_one_storable_line() -> None:
    assert one_line("sacct: error:\n  slurmdbd\x00 down\udcff") == "sacct: error: slurmdbd\ufffd down\ufffd"
    assert one_line("x" * 400) == "x" * 297 + "..."
    assert one_line("a\tb", limit=10) == "a b"


# sacct


def _sacct(tmp_path: Path, body: str) -> str:
    script = tmp_path / "sacct"
    script.write_text(f'#!/bin/sh\necho "$TZ $*" >> {tmp_path}/calls\n{body}\n')
    script.chmod(0o755)
    return str(script)


def test_sacct_is_run_twice_with_utc_and_its_exit_codes_put_in(tmp_path: Path) -> None:
    # given a sacct whose JSON says a job failed (22.05: no number) and whose parsable output says 3
    document = json.dumps({"jobs": [_record(7, state={"current": "FAILED"}, exit_code={"status": "SUCCESS"})]})
    command = _sacct(tmp_path, f"case \"$*\" in *--json*) echo '{document}';; *) echo '7|3:0';; esac")
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=f"{command} --cluster=a")
    # when
    [job] = sacct_records_read(cluster=cluster, start=START, end=END)
    # then
    assert (job.job_key, job.state, job.exit_code, job.signal) == ("slurm/7", JobState.FAILED, 3, 0)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[:3] for c in calls] == [["UTC", "--cluster=a", "--json"], ["UTC", "--cluster=a", "--parsable2"]]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("echo 'sacct: error: Problem talking to the database' >&2; exit 1", "exited 1: sacct: error: Problem talking"),
        ("echo 'not json'", "sacct --json output is not JSON"),
        ("exit 3", "exited 3: no message"),
    ],
)
def test_a_sacct_that_fails_is_one_line_naming_the_cluster(tmp_path: Path, body: str, said: str) -> None:
    cluster = ClusterFactory(name="gpu-a", scheduler="slurm_sacct", sacct_command=_sacct(tmp_path, body))
    with pytest.raises(SchedulerUnavailable) as caught:
        sacct_records_read(cluster=cluster, start=START, end=END)
    assert str(caught.value).startswith("cluster gpu-a: ") and said in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("command", "said"),
    [("'unclosed", "sacct_command cannot be read"), ("  ", "sacct_command is empty"), ("/no/such/sacct", "not found")],
)
def test_a_sacct_command_that_cannot_run_is_named(command: str, said: str) -> None:
    cluster = ClusterFactory(name="gpu-b", scheduler="slurm_sacct", sacct_command=command)
    with pytest.raises(SchedulerUnavailable, match=said):
        sacct_records_read(cluster=cluster, start=START, end=END)


# slurmrestd and kube-state-metrics, over HTTP


@pytest.fixture
def server() -> Iterator[JsonServer]:
    with json_server() as found:
        yield found


def test_slurmrestd_is_asked_with_the_token_from_the_environment(server: JsonServer, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_JWT", "jwt-secret")
    server.answer = (200, {"jobs": [_record(9)]})
    cluster = ClusterFactory(scheduler="slurm_rest", slurmrest_url=server.url + "/", slurmrest_token_env="SLURM_JWT",
                             slurmrest_user="fleetwatt")  # fmt: skip
    [job] = slurmrest_records_read(cluster=cluster, start=START, end=END)
    assert job.job_key == "slurm/9"
    [asked] = server.asked
    path = urlsplit(asked["path"])
    assert path.path == SLURMDB_JOBS_PATH
    assert asked["headers"]["X-SLURM-USER-TOKEN"] == "jwt-secret"
    assert asked["headers"]["X-SLURM-USER-NAME"] == "fleetwatt"
    # times relative to slurmrestd's own clock: the same in any zone
    assert all(v[0].startswith("now-") for v in parse_qs(path.query).values())


def test_slurmrestd_without_its_token_or_answering_an_error_is_named(server: JsonServer, monkeypatch) -> None:
    cluster = ClusterFactory(
        name="rest", scheduler="slurm_rest", slurmrest_url=server.url, slurmrest_token_env="NO_JWT"
    )
    monkeypatch.delenv("NO_JWT", raising=False)
    with pytest.raises(SchedulerUnavailable, match=r"environment variable NO_JWT .* is not set"):
        slurmrest_records_read(cluster=cluster, start=START, end=END)
    assert server.asked == []  # nothing asked without it
    monkeypatch.setenv("NO_JWT", "t")
    server.answer = (500, {"errors": [{"error": "slurmdbd\ndown"}]})
    with pytest.raises(SchedulerUnavailable, match=r"^cluster rest: GET .* HTTP 500: ") as caught:
        slurmrest_records_read(cluster=cluster, start=START, end=END)
    assert "\n" not in str(caught.value)


def _vector(*series: dict[str, Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(series)}}


def test_kube_state_metrics_is_asked_a_fixed_handful_of_queries_at_the_windows_end(server: JsonServer) -> None:
    # (one answer to every query: the times query's tag too)
    pod = {"metric": {"namespace": "ml", "pod": "p", "uid": "u", "node": "n1", "fw_q": "created"}, "value": [0, "1"]}
    server.answer = (200, _vector(pod))
    cluster = ClusterFactory(scheduler="kube_state_metrics", prometheus_url=server.url, selector='cluster="k"')
    jobs = kube_records_read(cluster=cluster, start=START, end=END)
    assert [j.job_key for j in jobs] == ["k8s/ml/p"]
    assert len(server.asked) == 7
    assert {a["form"]["time"][0] for a in server.asked} == {f"{END.timestamp() - 0.001:.3f}"}
    assert all('cluster="k"' in a["form"]["query"][0] for a in server.asked)


def test_a_server_that_is_not_prometheus_is_named(server: JsonServer) -> None:
    server.answer = (200, {"hello": "world"})
    cluster = ClusterFactory(name="k", scheduler="kube_state_metrics", prometheus_url=server.url)
    with pytest.raises(SchedulerUnavailable, match=r"^cluster k: kube-state-metrics: "):
        kube_records_read(cluster=cluster, start=START, end=END)


# every source, checked


def test_no_source_configured_is_named() -> None:
    with pytest.raises(SchedulerUnavailable, match="no scheduler configured"):
        scheduler_records_read(cluster=ClusterFactory(name="none", scheduler=""), start=START, end=END)


def test_one_record_that_cannot_be_stored_fails_the_window_whole(tmp_path: Path) -> None:
    document = json.dumps({"jobs": [_record(1), _record(2, user="ada\u0007")]})
    command = _sacct(tmp_path, f"case \"$*\" in *--json*) echo '{document}';; esac")
    cluster = ClusterFactory(name="c", scheduler="slurm_sacct", sacct_command=command)
    with pytest.raises(SchedulerUnavailable, match=r"^cluster c: job '2' user holds the control character"):
        scheduler_records_read(cluster=cluster, start=START, end=END)


def test_the_recorded_fixtures_read_through_a_sacct_that_prints_them(tmp_path: Path) -> None:
    body = f'case "$*" in *--json*) cat {FIXTURES}/sacct-json-22.05.json;; esac'  # and no parsable lines
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=_sacct(tmp_path, body))
    jobs = scheduler_records_read(cluster=cluster, start=START, end=END)
    assert len(jobs) == 9 and all(j.job_key == f"slurm/{j.job_id}" for j in jobs)
    # without the parsable exit codes, a failed job's code stays unknown: never a wrong 0
    assert all(j.exit_code is None for j in jobs if j.state is JobState.FAILED)
