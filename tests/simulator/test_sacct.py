"""The simulated Slurm accounting (apps/simulator/sacct.py): what sacct 22.05 prints for a scenario's jobs, read
back by fleetwatt's own parser as the sync reads a real sacct (pure: no database, no process)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from apps.schedulers.slurm import (
    JobState,
    exit_codes_apply,
    sacct_json_parse,
    sacct_parsable_exit_codes,
)
from apps.simulator.sacct import (
    SUBMIT_LEAD_S,
    AccountingRecord,
    SacctUsageError,
    accounting_records,
    records_select,
    sacct_fields,
    sacct_json_render,
    sacct_parsable_render,
    sacct_time_parse,
)
from apps.simulator.scenario import JobSpec, Scenario, scenario_from_dict, scenario_load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
ANCHOR = datetime(2026, 11, 24, 2, 0, tzinfo=UTC)  # where `make demo` anchored `now-7d`, as `simulate --start`
# What sacct's ExitCode reads for each ending the scenario gives without an exit of its own (module docstring).
EXIT_BY_STATE = {
    "completed": (0, 0),
    "failed": (1, 0),
    "cancelled": (0, 0),
    "timeout": (0, 0),
    "out_of_memory": (None, 125),
    "node_fail": (0, 0),
    "preempted": (0, 0),
}


def demo_at(anchor: datetime = ANCHOR) -> Scenario:
    scenario = scenario_load("demo", now=anchor)
    scenario.start = anchor
    return scenario


def read_back(records: list[AccountingRecord], *, now: datetime) -> dict[str, Any]:
    """What the scheduler sync makes of the two outputs, by job id."""
    document = sacct_json_render(records, cluster="demo", now=now)
    parsable = sacct_parsable_render(
        records, fields=["JobIDRaw", "ExitCode"], cluster="demo", now=now, header=False, allocations_only=True
    )
    jobs = exit_codes_apply(sacct_json_parse(document), sacct_parsable_exit_codes(parsable))
    return {job.job_id: job for job in jobs}


def expected_exit(spec: JobSpec) -> tuple[int | None, int]:
    if spec.signal:
        return None, spec.signal
    code, signal = EXIT_BY_STATE[spec.state]
    return (spec.exit_code if spec.exit_code is not None else code), signal


def at(scenario: Scenario, seconds: int) -> datetime:
    return scenario.start + timedelta(seconds=seconds)


def test_every_ended_job_of_the_demo_reads_back_as_the_scenario_says() -> None:
    # given the demo's week, anchored as the demo anchored it, read once every job has ended
    scenario = demo_at()
    now = at(scenario, scenario.duration_s + 3600)
    slurm = [j for j in scenario.jobs if j.scheduler == "slurm"]
    # when its whole accounting is printed and parsed as the sync parses sacct's
    jobs = read_back(records_select(accounting_records(scenario, now=now), start=None, end=now), now=now)
    # then every Slurm job is there, as the scenario (and the backfilled history) has it
    assert set(jobs) == {j.job_id for j in slurm}
    assert {j.state for j in slurm} >= {"completed", "failed", "cancelled", "timeout", "out_of_memory"}
    for spec in slurm:
        job = jobs[spec.job_id]
        where = f"job {spec.job_id} ({spec.state})"
        if spec.end_s >= scenario.duration_s:  # still running when the scenario ends
            assert (job.state, job.end, job.exit_code) == (JobState.RUNNING, None, None), where
        else:
            assert job.state == JobState(spec.state.upper()), where
            assert (job.exit_code, job.signal) == expected_exit(spec), where
            assert job.end == at(scenario, spec.end_s), where
        assert job.start == at(scenario, spec.start_s), where
        submit_s = spec.submit_s if spec.submit_s is not None else spec.start_s - SUBMIT_LEAD_S
        assert job.submit == at(scenario, submit_s), where
        assert job.nodes == (spec.node,), where
        assert (job.gpus_requested, job.gpus_allocated) == (spec.gpus_requested or len(spec.gpus), len(spec.gpus))
        assert (job.user, job.account, job.name, job.partition, job.qos) == (
            spec.user,
            spec.account,
            spec.name,
            spec.partition,
            spec.qos,
        ), where
        assert (job.job_key, job.display_id) == (spec.job_key, spec.job_id)  # the agent's key: they meet


def test_the_hand_written_jobs_end_as_the_demo_tells_them() -> None:
    scenario = demo_at()
    now = at(scenario, scenario.duration_s)
    jobs = read_back(accounting_records(scenario, now=now), now=now)
    assert jobs["900001"].state == JobState.COMPLETED
    assert (jobs["900002"].state, jobs["900002"].exit_code) == (JobState.TIMEOUT, 0)
    assert (jobs["900003"].state, jobs["900003"].exit_code) == (JobState.CANCELLED, 0)
    assert (jobs["900004"].state, jobs["900004"].exit_code, jobs["900004"].signal) == (JobState.FAILED, 2, 0)


def test_a_job_is_pending_then_running_then_ended_as_time_goes_by() -> None:
    # given one job submitted 10 minutes before its start, and one told its exit and signal
    job_7 = {"scheduler": "slurm", "job_id": "7", "node": "n1", "gpus": [1, 2], "start": "1h", "end": "2h",
             "submit": "50m", "state": "failed", "exit_code": 3, "gpus_requested": 3, "partition": "big",
             "qos": "high", "user": "ada", "account": "vision", "name": "train-x"}  # fmt: skip
    job_8 = {"scheduler": "slurm", "job_id": "8", "node": "n1", "gpus": [0], "start": "1h", "end": "3h",
             "state": "cancelled", "signal": 9}  # fmt: skip
    pod = {"scheduler": "k8s", "namespace": "a", "pod": "p", "node": "n1", "gpus": [3], "start": 0, "end": "1h"}
    scenario = scenario_from_dict(
        {
            "name": "one",
            "start": "2026-11-02T00:00:00Z",
            "duration": "4h",
            "nodes": [{"hostname": "n1", "gpus": 4}],
            "jobs": [job_7, job_8, pod],
        }
    )

    def state_at(seconds: int) -> dict[str, Any]:
        now = at(scenario, seconds)
        return read_back(accounting_records(scenario, now=now), now=now)

    # before its submission it is not in the accounting at all; the Kubernetes pod never is
    assert state_at(49 * 60) == {}
    # pending: submitted, nothing allocated, no start
    pending = state_at(55 * 60)["7"]
    assert (pending.state, pending.start, pending.end, pending.nodes) == (JobState.PENDING, None, None, ())
    assert (pending.gpus_requested, pending.gpus_allocated, pending.exit_code) == (3, 0, None)
    # running: started, allocated, no end and no exit yet
    running = state_at(90 * 60)["7"]
    assert (running.state, running.end, running.nodes, running.gpus_allocated) == (JobState.RUNNING, None, ("n1",), 2)
    assert running.start == at(scenario, 3600) and running.exit_code is None
    # ended: its state, its exit code (from the parsable output: 22.05's JSON says SUCCESS), its span
    ended = state_at(3 * 3600)
    assert (ended["7"].state, ended["7"].exit_code, ended["7"].signal) == (JobState.FAILED, 3, 0)
    assert (ended["7"].partition, ended["7"].qos, ended["7"].end) == ("big", "high", at(scenario, 7200))
    assert (ended["8"].state, ended["8"].exit_code, ended["8"].signal) == (JobState.CANCELLED, None, 9)


def test_the_window_selects_as_sacct_does() -> None:
    # given the demo's accounting half-way through its week
    scenario = demo_at()
    now = at(scenario, 5 * 86400)
    records = accounting_records(scenario, now=now)
    start, end = at(scenario, 2 * 86400), at(scenario, 3 * 86400)
    # when a day's window is selected
    chosen = {r.job_id for r in records_select(records, start=start, end=end)}
    # then: eligible before the window's end, not ended before its start (running: not ended)
    expected = {
        r.job_id for r in records if r.eligible < end.timestamp() and (r.end == 0 or r.end >= start.timestamp())
    }
    assert chosen == expected and 100 < len(chosen) < len(records)
    # a job that ended exactly at the window's start is in it; one eligible exactly at its end is not
    ended_at_start = next(r for r in records if r.end and r.end > start.timestamp())
    edge = datetime.fromtimestamp(ended_at_start.end, tz=UTC)
    assert ended_at_start.job_id in {r.job_id for r in records_select(records, start=edge, end=edge + timedelta(1))}
    eligible_at = datetime.fromtimestamp(ended_at_start.eligible, tz=UTC)
    before = records_select(records, start=eligible_at - timedelta(hours=1), end=eligible_at)
    assert ended_at_start.job_id not in {r.job_id for r in before}
    # -j picks jobs whenever they ran
    assert [r.job_id for r in records_select(records, start=None, end=now, job_ids=[900001])] == [900001]


def test_the_document_has_the_recorded_22_05_shape() -> None:
    # given the recorded output of a real sacct 22.05.8
    recorded = json.loads((FIXTURES / "sacct-json-22.05.json").read_text())
    scenario = demo_at()
    now = at(scenario, 4 * 86400)
    records = records_select(accounting_records(scenario, now=now), start=at(scenario, 3 * 86400), end=now)
    # when the simulation prints its own
    text = sacct_json_render(records, cluster="demo", now=now)
    simulated = json.loads(text)
    # then: the same meta, no errors, and every job and batch step with exactly the recorded fields
    assert simulated["meta"] == recorded["meta"] and simulated["errors"] == []
    job_fields = set(recorded["jobs"][0])
    step_fields = set(recorded["jobs"][0]["steps"][0])
    assert all(set(job) == job_fields for job in simulated["jobs"])
    for section in ("time", "array", "association", "tres", "state", "exit_code", "derived_exit_code"):
        shapes = {tuple(sorted(job[section])) for job in simulated["jobs"]}
        assert tuple(sorted(recorded["jobs"][1][section])) in shapes, section
    steps = [step for job in simulated["jobs"] for step in job["steps"]]
    assert steps and all(set(step) == step_fields for step in steps)
    assert all(set(s["time"]) == set(recorded["jobs"][0]["steps"][0]["time"]) for s in steps)
    # written as sacct writes it: two-space indents, empty lists opened and closed, slashes escaped
    assert text.startswith('{\n  "meta": {\n    "plugin": {\n      "type": "openapi\\/dbv0.0.38",')
    assert '"errors": [\n  ],' in text
    # a running job has no end; with -X no job has steps
    running = [job for job in simulated["jobs"] if job["state"]["current"] == "RUNNING"]
    assert running and all(job["time"]["end"] == 0 for job in running)
    allocations = json.loads(sacct_json_render(records, cluster="demo", now=now, allocations_only=True))
    assert all(job["steps"] == [] for job in allocations["jobs"])


def test_the_parsable_output_has_job_and_batch_lines() -> None:
    scenario = demo_at()
    now = at(scenario, scenario.duration_s)
    records = records_select(accounting_records(scenario, now=now), start=None, end=now, job_ids=[900002, 900004])
    fields = sacct_fields("JobID,JobIDRaw,State,ExitCode,NodeList,AllocTRES,ReqTRES%30")
    text = sacct_parsable_render(records, fields=fields, cluster="demo", now=now)
    assert text.splitlines() == [
        "JobID|JobIDRaw|State|ExitCode|NodeList|AllocTRES|ReqTRES",
        "900002|900002|TIMEOUT|0:0|gpu-x01|billing=12,cpu=12,gres/gpu=1,node=1|"
        "billing=12,cpu=12,gres/gpu=1,mem=96000M,node=1",
        "900002.batch|900002.batch|CANCELLED|0:15|gpu-x01|cpu=12,gres/gpu=1,mem=0,node=1|",
        "900004|900004|FAILED|2:0|gpu-x01|billing=24,cpu=24,gres/gpu=2,node=1|"
        "billing=24,cpu=24,gres/gpu=2,mem=192000M,node=1",
        "900004.batch|900004.batch|FAILED|2:0|gpu-x01|cpu=24,gres/gpu=2,mem=0,node=1|",
    ]
    # the sync's own form: no header, jobs only
    jobs_only = sacct_parsable_render(
        records, fields=["JobIDRaw", "ExitCode"], cluster="demo", now=now, header=False, allocations_only=True
    )
    assert sacct_parsable_exit_codes(jobs_only) == {"900002": (0, 0), "900004": (2, 0)}
    with pytest.raises(SacctUsageError, match='Invalid field requested: "Bogus"'):
        sacct_fields("JobIDRaw,Bogus")


def test_times_are_read_as_sacct_reads_them() -> None:
    now = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)
    berlin = timezone(timedelta(hours=1))
    assert sacct_time_parse("2026-12-01T00:00:00", now=now, zone=UTC) == datetime(2026, 12, 1, tzinfo=UTC)
    assert sacct_time_parse("2026-12-01T01:00", now=now, zone=berlin) == datetime(2026, 12, 1, tzinfo=UTC)
    assert sacct_time_parse("2026-12-01", now=now, zone=UTC) == datetime(2026, 12, 1, tzinfo=UTC)
    assert sacct_time_parse("now", now=now) == now
    assert sacct_time_parse("now-2hours", now=now) == now - timedelta(hours=2)
    assert sacct_time_parse("now+30", now=now) == now + timedelta(seconds=30)
    for bad in ("1796083402", "2026-12-01T00:00:00+00:00", "yesterday"):
        with pytest.raises(SacctUsageError, match="Invalid time specification"):
            sacct_time_parse(bad, now=now, zone=UTC)
