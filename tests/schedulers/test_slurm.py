"""Slurm's accounting as fleetwatt jobs (apps/schedulers/slurm.py, pure): a record's type and what it promises,
states as fleetwatt tells them apart, and, for any input, either records or a SchedulerDataError, never another
error and never a partial list (property tests over spoiled records, parsable lines and hostlists). The real
22.05 fixtures, the later releases' writers and each malformed field by name: tests/schedulers/test_slurm_parse.py.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.schedulers.slurm import (
    FINAL_STATES,
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

T0 = 1_793_613_600  # 2026-11-02 10:00 UTC

RECORD: dict[str, Any] = {
    "job_id": 42,
    "name": "train",
    "user": "ada",
    "account": "vision",
    "partition": "gpu",
    "qos": "normal",
    "cluster": "c1",
    "state": {"current": ["FAILED"]},
    "exit_code": {"status": ["ERROR"], "return_code": {"set": True, "infinite": False, "number": 3}},
    "time": {"submission": T0 - 60, "start": T0, "end": T0 + 3600},
    "array": {"job_id": 0, "task_id": {"set": False, "infinite": False, "number": 0}},
    "het": {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}},
    "nodes": "gpu[01-02]",
    "gres_detail": ["gpu:2(IDX:0-1)", "gpu:1(IDX:3)"],
    "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 3}], "requested": "cpu=4,gres/gpu=3"},
    "steps": [{"step": {"id": "42.batch", "name": "batch"}, "state": ["FAILED"], "exit_code": {"status": ["ERROR"]}}],
}


def _job(**fields: Any) -> SchedulerJob:
    base: dict[str, Any] = {
        "job_key": "slurm/42", "job_id": "42", "display_id": "42", "user": "ada", "account": "vision",
        "partition": "gpu", "qos": "normal", "name": "train", "state": JobState.FAILED, "state_raw": "FAILED",
        "exit_code": None, "signal": 0, "submit": None, "start": None, "end": None, "gpus_requested": 1,
        "gpus_allocated": 1, "nodes": ("gpu01",),
    }  # fmt: skip
    return SchedulerJob(**{**base, **fields})


# the record read whole


def test_a_record_of_a_later_writer_read_whole() -> None:
    [job] = sacct_json_parse(json.dumps({"jobs": [RECORD]}))
    assert (job.job_key, job.job_id, job.display_id, job.scheduler) == ("slurm/42", "42", "42", "slurm")
    assert (job.state, job.state_raw, job.exit_code, job.signal) == (JobState.FAILED, "FAILED", 3, 0)
    assert (job.submit, job.end) == (datetime.fromtimestamp(T0 - 60, UTC), datetime.fromtimestamp(T0 + 3600, UTC))
    assert (job.gpus_allocated, job.gpus_requested) == (3, 3)
    assert job.nodes == ("gpu01", "gpu02") and dict(job.gpu_indices) == {"gpu01": (0, 1), "gpu02": (3,)}
    assert (job.array_job_id, job.array_task_id, job.het_job_id, job.group_key) == (None, None, None, "")
    assert job.is_final and not job.is_stand_in


# SchedulerJob


def test_a_record_is_a_value_its_mappings_read_only() -> None:
    job = _job(nodes=["a", "b"], gpu_indices={"a": (0,)}, labels={"team": "x"})
    assert job.nodes == ("a", "b")
    with pytest.raises(TypeError):
        job.gpu_indices["b"] = (1,)  # type: ignore[index]
    with pytest.raises(TypeError):
        job.labels["team"] = "y"  # type: ignore[index]
    assert hash(job) == hash(_job(nodes=("a", "b")))  # the mappings are left out of its hash
    assert job == _job(nodes=("a", "b"), gpu_indices={"a": (0,)}, labels={"team": "x"})


def test_final_states_and_the_stand_in() -> None:
    assert {s for s in JobState if _job(state=s).is_final} == FINAL_STATES
    assert JobState.RUNNING not in FINAL_STATES and JobState.PENDING not in FINAL_STATES
    assert _job(name="allocation", partition="").is_stand_in
    assert not _job(name="allocation", partition="gpu").is_stand_in
    assert not _job(name="allocation", partition="", scheduler="k8s").is_stand_in  # only slurmdbd makes them


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("CD", JobState.COMPLETED),
        ("CA", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),  # sacct's + for a reason cut short
        ("cancelled by 1000", JobState.CANCELLED),
        ("OOM", JobState.OUT_OF_MEMORY),
        ("SUSPENDED", JobState.UNKNOWN),
        ("REQUEUED RUNNING", JobState.RUNNING),  # the first base state of the words
        (["COMPLETING"], JobState.UNKNOWN),  # a flag alone
        ((), JobState.UNKNOWN),
    ],
)
def test_a_state_is_its_first_base_state(raw: Any, state: JobState) -> None:
    assert state_normalise(raw) is state


def test_exit_codes_never_say_both_an_exit_and_a_signal() -> None:
    jobs = [_job(job_id=str(n), job_key=f"slurm/{n}") for n in (1, 2, 3)]
    jobs.append(_job(job_id="4", job_key="slurm/4", state=JobState.RUNNING))
    fixed = exit_codes_apply(jobs, {"1": (0, 9), "2.batch": (2, 0), "4": (1, 0)})
    assert [(j.exit_code, j.signal) for j in fixed] == [(None, 9), (2, 0), (None, 0), (None, 0)]
    assert jobs[0].signal == 0  # new records; the ones passed are left as they were


def test_gres_detail_of_other_resources_is_not_gpus() -> None:
    assert gres_gpu_indices("gpu:a100:2(IDX:0,3),mps:100(IDX:0)") == (0, 3)
    assert gres_gpu_indices("gpu:2(IDX:N/A)") == ()
    with pytest.raises(SchedulerDataError):
        gres_gpu_indices("gpu:2(IDX:a-b)")


# any input: records or SchedulerDataError


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*here, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*here, index))
    return found


PATHS = _paths(RECORD)[1:]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spoils=st.lists(st.tuples(st.sampled_from(PATHS), JSON), min_size=1, max_size=3))
def test_a_spoiled_record_is_read_or_refused_never_half(spoils: list[tuple[tuple[Any, ...], Any]]) -> None:
    # given a good record and a spoiled copy of it, one or more of its values anything JSON holds
    spoiled = copy.deepcopy(RECORD)
    for path, value in spoils:
        target: Any = spoiled
        try:
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier spoil replaced what held this path
    document = json.dumps({"jobs": [RECORD, spoiled]})
    # when read: both records, or SchedulerDataError, nothing else
    try:
        jobs = sacct_json_parse(document)
    except SchedulerDataError as exc:
        assert "\n" not in str(exc)
        return
    assert len(jobs) == 2 and all(j.job_key == f"slurm/{j.job_id}" for j in jobs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.|:-abJOBIDRAWExitCode \t", max_size=30), max_size=5))
def test_parsable_lines_are_read_or_refused(lines: list[str]) -> None:
    try:
        codes = sacct_parsable_exit_codes("\n".join(lines))
    except SchedulerDataError:
        return
    assert all(isinstance(k, str) and len(v) == 2 for k, v in codes.items())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="gpu0123456789[],- \t:", max_size=24))
def test_a_hostlist_is_expanded_or_refused(text: str) -> None:
    try:
        names = hostlist_expand(text)
    except HostlistError as exc:
        assert isinstance(exc, SchedulerDataError)
        return
    assert all(name and "[" not in name and "]" not in name and "," not in name for name in names)
