"""Slurm accounting output into SchedulerJob records (apps/schedulers/slurm.py): the real sacct output of the
local Slurm 22.05.8 in both fixture folders, the shapes of later releases, the hostlist expander, and
malformed input. No Slurm and no database needed."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.schedulers import slurm
from apps.schedulers.slurm import (
    MAX_HOSTS,
    HostlistError,
    JobState,
    SchedulerDataError,
    SchedulerJob,
    exit_codes_apply,
    gres_gpu_indices,
    hostlist_expand,
    sacct_json_parse,
    sacct_parsable_exit_codes,
    state_normalise,
)

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "tests" / "fixtures" / "slurm"
SHARED = Path("/work/shared/fixtures/slurm")
FOLDERS = [pytest.param(LOCAL, id="tests-fixtures"), pytest.param(SHARED, id="shared-fixtures")]


class Expected(NamedTuple):
    display_id: str
    name: str
    state: JobState
    exit_code: int
    signal: int
    gpus_requested: int
    gpus_allocated: int
    nodes: tuple[str, ...]
    array: tuple[str, int] | None = None


# What each job of the fixtures is (their READMEs): raw id -> expected record once parsable exit codes apply.
EXPECTED = {
    LOCAL: {
        "1": Expected("1", "tmo", JobState.TIMEOUT, 0, 0, 1, 1, ("vm",)),
        "2": Expected("2", "ok", JobState.COMPLETED, 0, 0, 2, 2, ("vm",)),
        "3": Expected("3", "fails", JobState.FAILED, 3, 0, 1, 1, ("vm",)),
        "4": Expected("4", "pending", JobState.CANCELLED, 0, 0, 4, 0, ()),
        "5": Expected("5", "cancelme", JobState.CANCELLED, 0, 0, 1, 1, ("vm",)),
        "6": Expected("6_2", "arr", JobState.COMPLETED, 0, 0, 1, 1, ("vm",), ("6", 2)),
        "7": Expected("7", "steps", JobState.COMPLETED, 0, 0, 1, 1, ("vm",)),
        "8": Expected("6_0", "arr", JobState.COMPLETED, 0, 0, 1, 1, ("vm",), ("6", 0)),
        "9": Expected("6_1", "arr", JobState.COMPLETED, 0, 0, 1, 1, ("vm",), ("6", 1)),
    },
    SHARED: {
        "1": Expected("1", "ok", JobState.COMPLETED, 0, 0, 2, 2, ("vm",)),
        "2": Expected("2", "fails", JobState.FAILED, 3, 0, 1, 1, ("vm",)),
        "3": Expected("3", "tmo", JobState.CANCELLED, 0, 0, 1, 1, ("vm",)),
        "4": Expected("4", "cancelme", JobState.CANCELLED, 0, 0, 1, 0, ()),
        "5": Expected("5_2", "arr", JobState.COMPLETED, 0, 0, 1, 1, ("vm",), ("5", 2)),
        "6": Expected("5_0", "arr", JobState.COMPLETED, 0, 0, 1, 1, ("vm",), ("5", 0)),
        "7": Expected("5_1", "arr", JobState.COMPLETED, 0, 0, 1, 1, ("vm",), ("5", 1)),
    },
}
CONTEXT = {
    LOCAL: {"user": "root", "account": "fwteam", "partition": "gpu", "qos": "normal", "cluster": "fwlocal"},
    SHARED: {"user": "root", "account": "vision", "partition": "gpu", "qos": "normal", "cluster": "fwtest"},
}


def fixture_jobs(folder: Path) -> list[SchedulerJob]:
    return sacct_json_parse((folder / "sacct-json-22.05.json").read_text())


def fixture_codes(folder: Path) -> dict[str, tuple[int, int]]:
    return sacct_parsable_exit_codes((folder / "sacct-parsable-22.05.txt").read_text())


def parsable_rows(folder: Path, name: str = "sacct-parsable-22.05.txt") -> list[dict[str, str]]:
    header, *lines = (folder / name).read_text().splitlines()
    return [dict(zip(header.split("|"), line.split("|"), strict=True)) for line in lines]


def parsable_time(text: str) -> datetime | None:
    """sacct's local ISO time; the fixture machines run on UTC (READMEs)."""
    if text in ("None", "Unknown", ""):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- the real 22.05 fixtures ------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_fixture_job_parses_to_its_record(folder: Path) -> None:
    # given the JSON and the parsable exit codes of the same jobs
    jobs, codes = fixture_jobs(folder), fixture_codes(folder)

    # when the exit codes are applied
    fixed = exit_codes_apply(jobs, codes)

    # then every job is there once, keyed by its raw id, with its state, exit code, GPUs, nodes and array ids
    expected = EXPECTED[folder]
    assert sorted(job.job_id for job in fixed) == sorted(expected)
    for job in fixed:
        want = expected[job.job_id]
        assert job.job_key == f"slurm/{job.job_id}"
        assert (job.display_id, job.name, job.state) == (want.display_id, want.name, want.state)
        assert (job.exit_code, job.signal) == (want.exit_code, want.signal), job.display_id
        assert (job.gpus_requested, job.gpus_allocated) == (want.gpus_requested, want.gpus_allocated)
        assert job.nodes == want.nodes
        assert job.gpu_indices == {}  # sacct's 22.05 records carry no GRES detail
        assert ((job.array_job_id, job.array_task_id) if job.array_job_id else None) == want.array
        assert (job.het_job_id, job.het_job_offset) == (None, None)
        assert job.state_raw == want.state.value  # JSON writes the bare state
        for attribute, value in CONTEXT[folder].items():
            assert getattr(job, attribute) == value
        assert job.is_final and not job.is_stand_in


@pytest.mark.parametrize("folder", FOLDERS)
def test_fixture_ids_states_and_times_agree_with_parsable_output(folder: Path) -> None:
    # given the parsable output of the same jobs, one line per allocation
    rows = {row["JobIDRaw"]: row for row in parsable_rows(folder)}

    # when the JSON is parsed
    jobs = fixture_jobs(folder)

    # then each job's display id is sacct's JobID, its state sacct's State, and its times sacct's times, in UTC
    assert sorted(job.job_id for job in jobs) == sorted(rows)
    for job in jobs:
        row = rows[job.job_id]
        assert job.display_id == row["JobID"]
        assert job.state == state_normalise(row["State"])
        assert (job.submit, job.start, job.end) == tuple(parsable_time(row[k]) for k in ("Submit", "Start", "End"))
        for moment in (job.submit, job.start, job.end):
            assert moment is None or moment.tzinfo is UTC
        assert job.name == row["JobName"] and job.account == row["Account"] and job.partition == row["Partition"]


def test_pending_cancelled_job_has_no_start_in_shared_fixture_and_start_equal_end_in_local() -> None:
    # given the two ways the same case was recorded (README: depends on slurmdbd's timing)
    shared = {job.name: job for job in fixture_jobs(SHARED)}["cancelme"]
    local = {job.name: job for job in fixture_jobs(LOCAL)}["pending"]

    # then the shared one has no start (JSON null), the local one a start equal to its end; neither has nodes
    assert shared.start is None and shared.end == datetime(2026, 11, 30, 21, 57, 42, tzinfo=UTC)
    assert local.start == local.end == datetime(2026, 12, 1, 0, 3, 23, tzinfo=UTC)
    assert shared.nodes == local.nodes == ()
    assert shared.gpus_allocated == local.gpus_allocated == 0


@pytest.mark.parametrize("folder", FOLDERS)
def test_json_alone_never_reports_a_wrong_exit_code(folder: Path) -> None:
    # given the JSON alone, where 22.05 writes every normal exit as SUCCESS/0 (docs/schedulers.md)
    jobs = {job.job_id: job for job in fixture_jobs(folder)}

    # then only COMPLETED jobs read exit 0; the failed one (which exited 3) and the others read unknown, no signal
    for job in jobs.values():
        if job.state is JobState.COMPLETED:
            assert (job.exit_code, job.signal) == (0, 0)
        else:
            assert (job.exit_code, job.signal) == (None, 0), job.display_id
    assert {job.name: job.exit_code for job in jobs.values()}["fails"] is None


def test_job_steps_are_not_jobs() -> None:
    # given the local JSON, taken without -X: every job carries its steps (batch, and 0 and 1 for `steps`)
    document = json.loads((LOCAL / "sacct-json-22.05.json").read_text())
    steps = {job["job_id"]: [step["step"]["id"] for step in job["steps"]] for job in document["jobs"]}
    assert steps[7] == ["batch", 0, 1]

    # when parsed
    jobs = fixture_jobs(LOCAL)

    # then one record per allocation and none per step
    assert len(jobs) == len(document["jobs"]) == 9
    assert all(job.job_id.isdigit() for job in jobs)


def test_job_keys_are_what_the_agent_saw_inside_each_job() -> None:
    # given what each job printed of its own environment: SLURM_JOB_ID and the array pair (job-env.txt)
    seen = {}
    for line in (LOCAL / "job-env.txt").read_text().splitlines():
        fields = dict(word.split("=", 1) for word in line.split()[1:])
        seen[fields["job"]] = fields["array"]

    # when the JSON is parsed
    jobs = {job.job_key: job for job in fixture_jobs(LOCAL)}

    # then the agent's key slurm/<SLURM_JOB_ID> finds each job, and an array task's pair is its display id
    for job_id, array in seen.items():
        job = jobs[f"slurm/{job_id}"]
        assert job.display_id == (array if array != "_" else job_id)
    assert jobs["slurm/6"].display_id == "6_2"  # the array's own id is its last task, not the array


# --- sacct --parsable2 exit codes ---------------------------------------------------------------------------


def test_parsable_exit_codes_from_the_fixtures_wide_output_with_header() -> None:
    # when the fixtures' parsable output (header, 22 columns) is read
    codes = sacct_parsable_exit_codes((LOCAL / "sacct-parsable-22.05.txt").read_text())

    # then each raw id has its N:S; the failed job's 3 is there, array tasks are under their raw ids
    assert codes == {str(i): (3, 0) if i == 3 else (0, 0) for i in range(1, 10)}
    assert sacct_parsable_exit_codes((SHARED / "sacct-parsable-22.05.txt").read_text())["2"] == (3, 0)


def test_parsable_exit_codes_keep_step_lines_under_their_step_ids() -> None:
    # when the output with steps (no -X) is read
    codes = sacct_parsable_exit_codes((LOCAL / "sacct-parsable-steps-22.05.txt").read_text())

    # then the batch steps that were killed show their signal; steps keep their own ids
    assert codes["1.batch"] == (0, 15) and codes["5.batch"] == (0, 15)
    assert codes["3.batch"] == (3, 0)
    assert {"7.0", "7.1", "8.batch"} <= set(codes)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3|3:0\n3.batch|3:0\n", {"3": (3, 0), "3.batch": (3, 0)}),
        ("JobIDRaw|ExitCode\n12|0:9\n", {"12": (0, 9)}),
        ("ExitCode|JobIDRaw\n1:0|12\n", {"12": (1, 0)}),
        ("12|2:0|\n", {"12": (2, 0)}),  # --parsable (not 2) ends lines with "|"
        ("\n12|0:0\n\n13|\n", {"12": (0, 0)}),  # blank lines skipped; no ExitCode, no entry
        ("", {}),
    ],
    ids=["noheader", "header", "header-columns-swapped", "parsable-trailing-pipe", "blank-and-empty", "empty"],
)
def test_parsable_exit_codes_with_and_without_header(text: str, expected: dict[str, tuple[int, int]]) -> None:
    assert sacct_parsable_exit_codes(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("12|3\n", "ExitCode is not N:S"),
        ("12|0:0|x\n", "expected JobIDRaw|ExitCode"),
        ("6_0|0:0\n", "not a raw job id"),
        ("JobID|ExitCode\n6_0|0:0\n", "needs the JobIDRaw column"),
        ("JobIDRaw|State\n6|COMPLETED\n", "no ExitCode column"),
        ("JobIDRaw|ExitCode\n6|0:0|x\n", "line 2: expected 2 fields"),
    ],
)
def test_parsable_exit_codes_refuse_malformed_lines(text: str, message: str) -> None:
    with pytest.raises(SchedulerDataError, match=message):
        sacct_parsable_exit_codes(text)


def test_failed_job_without_a_parsable_line_keeps_an_unknown_exit_code() -> None:
    # given the JSON (exit 3 written as SUCCESS/0) and parsable codes that miss the failed job
    jobs = fixture_jobs(LOCAL)
    codes = {raw: code for raw, code in fixture_codes(LOCAL).items() if raw != "3"}

    # when applied
    fixed = {job.job_id: job for job in exit_codes_apply(jobs, codes)}

    # then the failed job's exit code stays unknown rather than a wrong 0; the others are filled in
    assert fixed["3"].state is JobState.FAILED
    assert (fixed["3"].exit_code, fixed["3"].signal) == (None, 0)
    assert (fixed["1"].exit_code, fixed["1"].signal) == (0, 0)


def test_exit_codes_apply_uses_the_batch_step_where_the_job_line_is_missing() -> None:
    # given only step lines for job 3 and a signalled batch step for job 5
    jobs = fixture_jobs(LOCAL)
    codes = {"3.batch": (3, 0), "5.batch": (0, 15)}

    # when applied
    fixed = {job.job_id: job for job in exit_codes_apply(jobs, codes)}

    # then job 3 exited 3; job 5 was killed by signal 15, so it has no exit status
    assert (fixed["3"].exit_code, fixed["3"].signal) == (3, 0)
    assert (fixed["5"].exit_code, fixed["5"].signal) == (None, 15)


def test_exit_codes_apply_prefers_the_job_line_and_returns_new_records() -> None:
    # given both a job line and a step line, as sacct prints them without -X
    jobs = fixture_jobs(LOCAL)
    codes = sacct_parsable_exit_codes((LOCAL / "sacct-parsable-steps-22.05.txt").read_text())

    # when applied
    fixed = {job.job_id: job for job in exit_codes_apply(jobs, codes)}

    # then the job's own 0:0 wins over its batch step's 0:15, and the input records are unchanged
    assert (fixed["1"].exit_code, fixed["1"].signal) == (0, 0)
    assert {job.job_id: job for job in jobs}["3"].exit_code is None
    with pytest.raises(FrozenInstanceError):
        fixed["3"].exit_code = 4  # type: ignore[misc]


def test_exit_codes_apply_leaves_running_jobs_without_an_exit_code() -> None:
    # given a running job, which sacct lists as 0:0
    times = {"submission": 1767225600, "start": 1767225660, "end": 0}
    document = {
        "jobs": [later_job(70, state={"current": ["RUNNING"]}, time=times, exit_code=exit_code(["SUCCESS"], 0))]
    }
    jobs = sacct_json_parse(json.dumps(document))

    # when applied
    (job,) = exit_codes_apply(jobs, {"70": (0, 0)})

    # then it still has none, and no end
    assert (job.state, job.exit_code, job.signal, job.end) == (JobState.RUNNING, None, None, None)


# --- states -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("COMPLETED", JobState.COMPLETED),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("TIMEOUT", JobState.TIMEOUT),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("OOM", JobState.OUT_OF_MEMORY),
        ("NODE_FAIL", JobState.NODE_FAIL),
        ("PREEMPTED", JobState.PREEMPTED),
        ("FAILED", JobState.FAILED),
        ("PD", JobState.PENDING),
        (["RUNNING", "COMPLETING"], JobState.RUNNING),
        (["REQUEUED", "PENDING"], JobState.PENDING),
        ("SUSPENDED", JobState.UNKNOWN),
        ("BOOT_FAIL", JobState.UNKNOWN),
        ("REQUEUED", JobState.UNKNOWN),
        ("", JobState.UNKNOWN),
        ([], JobState.UNKNOWN),
    ],
)
def test_states_are_normalised(raw: str | list[str], expected: JobState) -> None:
    assert state_normalise(raw) is expected


# --- later releases (data_parser v0.0.39 to v0.0.42) ----------------------------------------------------------
# Shapes from SchedMD's data_parser job and step tables (src/plugins/data_parser/v0.0.42/parsers.c): the job's
# times are epoch seconds, array.task_id/het.job_offset/time.limit and a step's times are {set, infinite,
# number}, states are lists, exit codes are {status: [..], return_code: {..}, signal: {id: {..}, name}}.


def no_val(number: int | None = None, *, infinite: bool = False) -> dict[str, Any]:
    return {"set": number is not None, "infinite": infinite, "number": number or 0}


def exit_code(status: list[str], number: int | None = None, signal: int | None = None) -> dict[str, Any]:
    return {
        "status": status,
        "return_code": no_val(number),
        "signal": {"id": no_val(signal), "name": f"SIG{signal}" if signal else ""},
    }


def later_job(job_id: int, **overrides: Any) -> dict[str, Any]:
    """One job as the v0.0.42 writer lays it out (fields fleetwatt reads, and some it does not)."""
    job: dict[str, Any] = {
        "account": "vision",
        "allocation_nodes": 2,
        "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task_id": no_val(), "task": None},
        "association": {"account": "vision", "cluster": "big", "partition": None, "user": "alice", "id": 12},
        "cluster": "big",
        "derived_exit_code": exit_code(["SUCCESS"], 0),
        "exit_code": exit_code(["SUCCESS"], 0),
        "flags": ["STARTED_ON_SCHEDULE"],
        "het": {"job_id": 0, "job_offset": no_val()},
        "job_id": job_id,
        "name": "train",
        "nodes": "gpu[01-02]",
        "partition": "h100",
        "priority": no_val(4294901759),
        "qos": "high",
        "required": {"CPUs": 16, "memory_per_cpu": no_val(), "memory_per_node": no_val(64000)},
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "steps": [],
        "time": {
            "elapsed": 3600,
            "eligible": 1767225600,
            "end": 1767229260,
            "limit": no_val(120),
            "planned": no_val(60),
            "start": 1767225660,
            "submission": 1767225600,
            "suspended": 0,
        },
        "tres": {
            "allocated": [
                {"type": "cpu", "name": "", "id": 1, "count": 16},
                {"type": "gres", "name": "gpu", "id": 1001, "count": 8},
                {"type": "gres", "name": "gpu:h100", "id": 1002, "count": 8},
            ],
            "requested": [
                {"type": "cpu", "name": "", "id": 1, "count": 16},
                {"type": "gres", "name": "gpu", "id": 1001, "count": 8},
            ],
        },
        "user": "alice",
    }
    job.update(overrides)
    return job


def later_step(job_id: int, step: str, state: list[str], code: dict[str, Any]) -> dict[str, Any]:
    return {
        "exit_code": code,
        "nodes": {"count": 1, "range": "gpu01", "list": ["gpu01"]},
        "state": state,
        "step": {"id": f"{job_id}.{step}", "name": step},
        "time": {"elapsed": 10, "end": no_val(1767229260), "start": no_val(1767225660)},
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 8}]},
    }


LATER = {
    "meta": {
        "plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.42"},
        "Slurm": {"version": {"major": "24", "micro": "1", "minor": "11"}, "release": "24.11.1"},
    },
    "jobs": [
        later_job(41, state={"current": ["FAILED"], "reason": "NonZeroExitCode"}, exit_code=exit_code(["ERROR"], 3)),
        later_job(
            42,
            state={"current": ["CANCELLED"], "reason": "None"},
            exit_code=exit_code(["SIGNALED"], signal=9),
            kill_request_user="alice",
        ),
        later_job(
            57,
            name="sweep",
            array={"job_id": 50, "limits": {"max": {"running": {"tasks": 4}}}, "task_id": no_val(7), "task": None},
            nodes="gpu07",
            tres={"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 1}], "requested": []},
        ),
        later_job(
            50,
            name="sweep",
            array={"job_id": 50, "limits": {"max": {"running": {"tasks": 4}}}, "task_id": no_val(), "task": "8-15"},
            state={"current": ["PENDING"], "reason": "JobArrayTaskLimit"},
            exit_code=exit_code(["PENDING"]),
            nodes="None assigned",
            time={"elapsed": 0, "eligible": 1767225600, "end": 0, "start": 0, "submission": 1767225600},
            tres={"allocated": [], "requested": [{"type": "gres", "name": "gpu", "id": 1001, "count": 1}]},
        ),
        later_job(
            61,
            het={"job_id": 60, "job_offset": no_val(1)},
            state={"current": ["TIMEOUT"], "reason": "None"},
            exit_code=exit_code(["INVALID"]),
            steps=[
                later_step(61, "extern", ["COMPLETED"], exit_code(["SUCCESS"], 0)),
                later_step(61, "batch", ["CANCELLED"], exit_code(["SIGNALED"], signal=15)),
            ],
        ),
    ],
    "warnings": [],
    "errors": [],
}


@pytest.fixture
def later_jobs() -> dict[str, SchedulerJob]:
    return {job.job_id: job for job in sacct_json_parse(json.dumps(LATER))}


def test_later_release_exit_codes_are_read_from_status_lists(later_jobs: dict[str, SchedulerJob]) -> None:
    # then ERROR carries its number, SIGNALED its signal, and neither needs parsable output
    assert (later_jobs["41"].state, later_jobs["41"].exit_code, later_jobs["41"].signal) == (JobState.FAILED, 3, 0)
    assert (later_jobs["42"].state, later_jobs["42"].exit_code, later_jobs["42"].signal) == (
        JobState.CANCELLED,
        None,
        9,
    )
    assert (later_jobs["57"].exit_code, later_jobs["57"].signal) == (0, 0)


def test_later_release_job_without_own_exit_code_takes_the_batch_steps(later_jobs: dict[str, SchedulerJob]) -> None:
    # given a job whose exit code is INVALID and whose batch step ("61.batch") was killed by SIGTERM
    job = later_jobs["61"]

    # then the batch step's signal stands in; the extern step is not a job
    assert (job.state, job.exit_code, job.signal) == (JobState.TIMEOUT, None, 15)
    assert "61.batch" not in later_jobs and len(later_jobs) == 5


def test_later_release_array_and_het_ids(later_jobs: dict[str, SchedulerJob]) -> None:
    # then an array task's id comes from the {set, number} task id, pending tasks show their range, and a
    # het component is <het id>+<offset> under its own key
    task, pending, component = later_jobs["57"], later_jobs["50"], later_jobs["61"]
    assert (task.job_key, task.display_id, task.array_job_id, task.array_task_id) == ("slurm/57", "50_7", "50", 7)
    assert (pending.display_id, pending.array_task_id, pending.state) == ("50_[8-15]", None, JobState.PENDING)
    assert (pending.exit_code, pending.signal, pending.start, pending.nodes) == (None, None, None, ())
    assert (component.job_key, component.display_id) == ("slurm/61", "60+1")
    assert (component.het_job_id, component.het_job_offset) == ("60", 1)
    assert later_jobs["41"].display_id == "41" and later_jobs["41"].het_job_offset is None


def test_later_release_times_gpus_nodes_and_text(later_jobs: dict[str, SchedulerJob]) -> None:
    job = later_jobs["41"]
    assert job.submit == datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    assert job.start == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert job.end == datetime(2026, 1, 1, 1, 1, tzinfo=UTC)
    assert (job.gpus_requested, job.gpus_allocated) == (8, 8)  # the untyped total, not total + gpu:h100
    assert job.nodes == ("gpu01", "gpu02")
    assert (job.user, job.account, job.partition, job.qos, job.cluster) == ("alice", "vision", "h100", "high", "big")
    assert job.state_raw == "FAILED"
    assert (later_jobs["57"].gpus_requested, later_jobs["57"].gpus_allocated) == (0, 1)


def test_times_given_as_set_number_objects() -> None:
    # given job times written as {set, infinite, number}: set, unset, infinite
    times = {"submission": no_val(1767225600), "start": no_val(), "end": no_val(None, infinite=True)}
    document = {"jobs": [later_job(80, time=times, state={"current": ["CANCELLED"]})]}

    # when parsed
    (job,) = sacct_json_parse(json.dumps(document))

    # then set is a time, unset and infinite are unknown
    assert (job.submit, job.start, job.end) == (datetime(2026, 1, 1, tzinfo=UTC), None, None)


def test_state_with_flags_keeps_its_raw_words() -> None:
    document = {"jobs": [later_job(81, state={"current": ["RUNNING", "COMPLETING"], "reason": "None"})]}
    (job,) = sacct_json_parse(json.dumps(document))
    assert (job.state, job.state_raw, job.exit_code) == (JobState.RUNNING, "RUNNING,COMPLETING", None)


def test_tres_strings_and_typed_gpus_only() -> None:
    # given TRES as strings (as tres_alloc_str writes them), and a typed-only GPU list
    strings = later_job(82, tres={"allocated": "cpu=8,gres/gpu:a100=2,gres/gpu:v100=1", "requested": "cpu=8"})
    typed = later_job(83, tres={"allocated": [{"type": "gres", "name": "gpu:a100", "id": 1002, "count": 4}]})

    # when parsed
    jobs = {job.job_id: job for job in sacct_json_parse(json.dumps({"jobs": [strings, typed]}))}

    # then typed counts add up where there is no total, and no GPU TRES is 0
    assert (jobs["82"].gpus_allocated, jobs["82"].gpus_requested) == (3, 0)
    assert (jobs["83"].gpus_allocated, jobs["83"].gpus_requested) == (4, 0)


def test_gpu_indices_per_node_from_gres_detail() -> None:
    # given a record with one GRES detail per node, in node order
    record = later_job(84, nodes="gpu[01-03]", gres_detail=["gpu:2(IDX:0-1)", "gpu:h100:2(IDX:2,5)", "gpu:0(IDX:N/A)"])

    # when parsed
    (job,) = sacct_json_parse(json.dumps({"jobs": [record]}))

    # then each node has its indexes, and a node with none is left out
    assert job.gpu_indices == {"gpu01": (0, 1), "gpu02": (2, 5)}


@pytest.mark.parametrize(
    ("detail", "indices"),
    [
        ("gpu:2(IDX:0-1)", (0, 1)),
        ("gpu:a100:4(IDX:0,2-4)", (0, 2, 3, 4)),
        ("gpu(CNT:2)(IDX:6-7)", (6, 7)),
        ("gpu:1(IDX:3),mps:100(0/100)", (3,)),
        ("shard:2(1/2),gpu:tesla:1(IDX:1)", (1,)),
        ("gpu:0(IDX:N/A)", ()),
        ("mps:100(0/100)", ()),
        ("", ()),
    ],
)
def test_gres_detail_gpu_indices(detail: str, indices: tuple[int, ...]) -> None:
    assert gres_gpu_indices(detail) == indices


def test_a_stand_in_record_is_recognised() -> None:
    # given slurmdbd's placeholder: named "allocation", no partition, no TRES (docs/schedulers.md)
    record = later_job(85, name="allocation", partition=None, tres={"allocated": [], "requested": []})
    (job,) = sacct_json_parse(json.dumps({"jobs": [record]}))
    assert job.is_stand_in and job.partition == ""


# --- malformed input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sacct: error: Problem talking to the database", "not JSON"),
        ("", "not JSON"),
        ("[1, 2]", "is a list, not an object"),
        ('{"meta": {}, "errors": []}', "no 'jobs' list"),
        ('{"jobs": {"1": {}}}', "'jobs' is a dict, not a list"),
        ('{"jobs": [42]}', r"jobs\[0\] is a int"),
        ('{"jobs": [{"name": "x"}]}', r"jobs\[0\] has no job_id"),
        ('{"jobs": [{"job_id": "6_0"}]}', "not a number"),
        ('{"jobs": [{"job_id": 0}]}', "not a job id"),
        (
            '{"jobs": [], "errors": [{"description": "Unable to connect\\nto slurmdbd", "error_number": 7000}]}',
            "to slurmdbd",
        ),
    ],
)
def test_malformed_documents_raise(text: str, message: str) -> None:
    with pytest.raises(SchedulerDataError, match=message) as caught:
        sacct_json_parse(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"time": {"submission": "yesterday"}}, "job 90 time.submission is not a number"),
        ({"time": {"start": {"set": True}}}, "without a number"),
        ({"time": {"end": -5}}, "negative time"),
        ({"state": {"current": 3}}, "state is not a string"),
        ({"tres": {"allocated": 8}}, "tres.allocated is a int"),
        ({"tres": {"allocated": "gres/gpu=two"}}, "GPU count is not a number"),
        ({"nodes": "gpu[03-01]"}, "job 90 nodes: descending range"),
        ({"nodes": "gpu[01-02]", "gres_detail": ["gpu:1(IDX:0)"]}, "1 entries for 2 nodes"),
        ({"exit_code": "0:0"}, "exit_code is a str"),
        ({"user": 1000}, "user is a int"),
        ({"steps": {"batch": {}}}, "steps is a dict"),
    ],
)
def test_malformed_jobs_raise_and_nothing_is_half_returned(overrides: dict[str, Any], message: str) -> None:
    # given a good job followed by a broken one
    document = {"jobs": [later_job(89), later_job(90, **overrides)]}

    # then the whole document is refused, with a one-line message naming the job
    with pytest.raises(SchedulerDataError, match=message) as caught:
        sacct_json_parse(json.dumps(document))
    assert "\n" not in str(caught.value)


def test_errors_are_value_errors() -> None:
    assert issubclass(SchedulerDataError, ValueError)
    assert issubclass(HostlistError, SchedulerDataError)


# --- hostlists ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("vm", ["vm"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("node[1-010]", [f"node{i}" for i in range(1, 11)]),  # width from the low end
        ("node[001-3]", ["node001", "node002", "node003"]),
        ("node[0,02,4-5]", ["node0", "node02", "node4", "node5"]),  # single numbers kept as written
        ("n[1-2]-ib", ["n1-ib", "n2-ib"]),
        ("node[0-1].example", ["node0.example", "node1.example"]),
        ("dgx8-[6-7]", ["dgx8-6", "dgx8-7"]),
        ("[0-2]", ["0", "1", "2"]),
        (
            "rack[0-1]_node[0-2]",
            ["rack0_node0", "rack0_node1", "rack0_node2", "rack1_node0", "rack1_node1", "rack1_node2"],
        ),
        ("gpu[01-02],cpu[1-3],login", ["gpu01", "gpu02", "cpu1", "cpu2", "cpu3", "login"]),
        ("a[1,3],b[2-3,5]c", ["a1", "a3", "b2c", "b3c", "b5c"]),
        ("a b\tc,,d,", ["a", "b", "c", "d"]),
        ("node[3,1-2,1]", ["node3", "node1", "node2", "node1"]),
        ("node[1],node[1]", ["node1", "node1"]),
        ("node[18446744073709551615]", ["node18446744073709551615"]),
        ("", []),
        (" ,\t\n,", []),
    ],
)
def test_hostlist_expand(text: str, names: list[str]) -> None:
    assert hostlist_expand(text) == names


@pytest.mark.parametrize(
    "text",
    [
        "node[3-1]",
        "node[-1]",
        "node[1-3:2]",
        "node[a,b]",
        "node[]",
        "node[1,,2]",
        "node[1,]",
        "node[1-2",
        "node1-2]",
        "node[1-2-3]",
        "node[[1-2]]",
        "node[1, 2]",
    ],
)
def test_hostlist_expand_refuses_bad_syntax(text: str) -> None:
    with pytest.raises(HostlistError):
        hostlist_expand(text)


def test_hostlist_expand_refuses_a_list_too_long_to_be_a_node_list() -> None:
    with pytest.raises(HostlistError, match="longer than"):
        hostlist_expand(f"n[0-{MAX_HOSTS}]")
    with pytest.raises(HostlistError, match="longer than"):
        hostlist_expand("r[0-999]n[0-999]")
    with pytest.raises(HostlistError, match="longer than"):
        hostlist_expand(f"n[1-{MAX_HOSTS}],login")
    assert len(hostlist_expand(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS


_NUMBERED = re.compile(r"(.*?)(\d+)(\D*)")


def hostlist_compress(names: list[str]) -> str:
    """A reference compressor for the property test: names that differ only in a number of the same width,
    between the same prefix and suffix, share a bracket of ranges."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    parts: list[str] = []
    for name in names:
        match = _NUMBERED.fullmatch(name)
        if match is None:
            parts.append(name)
            continue
        prefix, digits, suffix = match.groups()
        groups.setdefault((prefix, suffix, len(digits)), []).append(int(digits))
    for (prefix, suffix, width), numbers in groups.items():
        numbers.sort()
        ranges, first, last = [], numbers[0], numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == last + 1:
                last = number
                continue
            low, high = str(first).zfill(width), str(last).zfill(width)
            ranges.append(low if first == last else f"{low}-{high}")
            if number is not None:
                first = last = number
        parts.append(f"{prefix}[{','.join(ranges)}]{suffix}")
    return ",".join(parts)


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-._", min_size=0, max_size=6)
_numbered = st.builds(
    lambda prefix, number, width, suffix: f"{prefix}{str(number).zfill(width)}{suffix}",
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_", min_size=1, max_size=5),
    st.integers(min_value=0, max_value=3000),
    st.integers(min_value=1, max_value=5),
    st.one_of(st.just(""), st.text(alphabet="abcdefghijklmnopqrstuvwxyz-.", min_size=1, max_size=4)),
)
_names = st.lists(st.one_of(_numbered, _word.filter(bool)), min_size=0, max_size=40, unique=True)


@settings(max_examples=300, deadline=None)
@given(_names)
def test_hostlist_expand_gives_back_the_names_of_a_compressed_list(names: list[str]) -> None:
    # given a compressed list of generated names
    compressed = hostlist_compress(names)

    # when expanded
    expanded = hostlist_expand(compressed)

    # then exactly the same names come back, each once
    assert Counter(expanded) == Counter(names)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"[a-z][a-z0-9._-]{0,10}", fullmatch=True), max_size=20))
def test_hostlist_expand_keeps_plain_names_in_order(names: list[str]) -> None:
    assert hostlist_expand(",".join(names)) == names


# --- purity ---------------------------------------------------------------------------------------------------


def test_the_module_is_pure() -> None:
    # given the module's imports
    tree = ast.parse(Path(slurm.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    # then no framework, no database, no processes
    roots = {name.split(".")[0] for name in imported}
    assert not roots & {"django", "rest_framework", "celery", "subprocess", "apps", "os", "socket"}


def test_a_window_with_no_jobs_is_no_jobs_not_an_error() -> None:
    # Slurm 22.05 says "Nothing found" (error 9003) for a quiet window: read on a real sacct
    assert sacct_json_parse((LOCAL / "sacct-json-22.05-nothing-found.json").read_text()) == []
    # any other error still fails the read, even beside it
    document = json.loads((LOCAL / "sacct-json-22.05-nothing-found.json").read_text())
    document["errors"].append({"description": "Unable to connect to slurmdbd", "error_number": 1007})
    with pytest.raises(SchedulerDataError, match="Unable to connect to slurmdbd"):
        sacct_json_parse(json.dumps(document))
