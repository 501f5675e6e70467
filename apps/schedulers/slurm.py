"""Slurm accounting records as fleetwatt jobs (pure: plain data in, plain data out; DESIGN section 8).

`sacct_json_parse` reads what `sacct --json` prints, `sacct_parsable_exit_codes` the ExitCode column of
`sacct --parsable2`, and `exit_codes_apply` puts the second into the first (Slurm 22.05's JSON gets exit
codes wrong, see below). Each job becomes a `SchedulerJob` that the app matches to the agent's series by
`job_key`. Nothing here runs sacct or touches the database.

Job keys
--------
The agent names a Slurm job `slurm/<id>` (docs/agent.md, "Jobs"; agent/fleetwatt_agent/discovery.py):
<id> is the number in the process's cgroup path (`job_<id>`), else SLURM_JOB_ID in its environment. Both
are the raw id of the allocation the process runs in, and that is the id of one accounting record, so
`job_key` is `slurm/<raw job id>` for every record, and `job_id` is that raw id:

- An array task is an allocation of its own with a raw id: task 6_0 ran as job 8, its processes saw
  SLURM_JOB_ID=8 and its cgroup is `job_8` (tests/fixtures/slurm/job-env.txt, docs/schedulers.md). Its
  key is `slurm/8`; `display_id` is `6_0`, the name people and squeue use; `array_job_id` and
  `array_task_id` keep the pair, and `group_key` `slurm-array/6` groups the sweep (job groups of kind
  `group_key` match it). The array's own id is not the array: it stays
  with the task that was last to leave the array record (6_2 ran as raw job 6, so `slurm/6` is task 2).
  A record of tasks that never started (`array.task` "3-9", no task id) shows as `6_[3-9]`.
- A heterogeneous job is one accounting record per component, each with a job id of its own (leader 10 is
  `10+0`, the next component 11 is `10+1`), and each component's steps run, with their cgroups, under that
  id. So a component's key is `slurm/<its own id>`, `display_id` is `<het_job_id>+<offset>`, and
  `het_job_id`/`het_job_offset` group the components. Not exercised on a real het job here: the local
  Slurm's fixtures have none. Where the agent reads SLURM_JOB_ID (no cgroup plugin), check on such a job
  whether a component's processes see their own id or the leader's.

Job steps (`.batch`, `.extern`, `.0`) run inside their job's allocation and share its key: they are not
jobs. The JSON nests them under their job; the batch step's exit code stands in where the job's is missing.

Slurm 22.05 (and the first writers of 23.02)
--------------------------------------------
The JSON writer `openapi/dbv0.0.38` writes every normal exit as `{"status": "SUCCESS", "return_code": 0}`,
whatever the code (`exit 3` included); only signals come through (docs/schedulers.md). So a job's exit
code from a string `status` "SUCCESS" is taken as 0 only when the job COMPLETED (which needs 0); for any
other final state it is None (exited normally, number unknown; `signal` 0) until `exit_codes_apply` brings
the number from `sacct --parsable2 -o JobIDRaw,ExitCode`. A FAILED job that parsable does not cover keeps
None: a wrong 0 would read as success.

Later releases (Slurm 23.02 to 24.11)
-------------------------------------
Read from the job and step parser tables of SchedMD's data_parser plugins
(src/plugins/data_parser/v0.0.40/parsers.c and v0.0.42/parsers.c, `PARSER_ARRAY(JOB)`/`(STEP)`) and the
OpenAPI clients generated from them (`v0.0.4x_process_exit_code_verbose`, `uint32_no_val_struct`). The
first data_parser (v0.0.39, 23.02) still wrote 22.05's string-status exit code, read as above; then:

- `exit_code`, `derived_exit_code`: `{"status": ["ERROR"], "return_code": {"set": true, "infinite": false,
  "number": 3}, "signal": {"id": {"set": true, "infinite": false, "number": 9}, "name": "SIGKILL"}}`: the
  status is a list (SUCCESS, ERROR, SIGNALED, CORE_DUMPED, PENDING, INVALID) and its numbers are trusted.
- numbers that can be unset (`array.task_id`, `het.job_offset`, `time.limit`, a step's `time.start` and
  `time.end`) are `{"set", "infinite", "number"}` objects; the job's own times stay plain epoch seconds in
  v0.0.42. Every number here is read in either form: unset, infinite and Slurm's NO_VAL/INFINITE
  sentinels mean unknown, and so does a time of 0.
- `state.current` and a step's `state` are lists: the base state and flags (`["RUNNING", "COMPLETING"]`).
- a step's `step.id` is a string `"8.batch"` (it was `"batch"`, or a number for `srun` steps).
- TRES stay where 22.05 put them (`tres.allocated`, `tres.requested`: lists of `{"type", "name", "id",
  "count"}`); TRES strings (`cpu=1,gres/gpu=2`, as in `tres_alloc_str`) are read too.

GPU indexes per node come from `gres_detail` (one `gpu:2(IDX:0-1)` per node, in node order) where a record
has it; sacct's records of 22.05 carry none (the fixtures), so `gpu_indices` is then empty.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class SchedulerDataError(ValueError):
    """Scheduler output that cannot be read; the message says what and where, on one line."""


class HostlistError(SchedulerDataError):
    """A node list that is not valid Slurm hostlist syntax."""


class JobState(StrEnum):
    """A job's state, reduced to what fleetwatt tells apart; `SchedulerJob.state_raw` keeps Slurm's words."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    RUNNING = "RUNNING"
    PENDING = "PENDING"
    UNKNOWN = "UNKNOWN"


FINAL_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
    }
)
# Slurm's base states (the rest of a state list are flags: COMPLETING, REQUEUED...) and squeue's short codes.
# SUSPENDED, BOOT_FAIL and DEADLINE are base states fleetwatt does not tell apart: UNKNOWN, raw text kept.
_BASE_STATES = {s.value: s for s in JobState if s is not JobState.UNKNOWN} | {
    "SUSPENDED": JobState.UNKNOWN,
    "BOOT_FAIL": JobState.UNKNOWN,
    "DEADLINE": JobState.UNKNOWN,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "CA": JobState.CANCELLED,
    "TO": JobState.TIMEOUT,
    "OOM": JobState.OUT_OF_MEMORY,
    "NF": JobState.NODE_FAIL,
    "PR": JobState.PREEMPTED,
    "R": JobState.RUNNING,
    "PD": JobState.PENDING,
}
# NO_VAL, INFINITE and their 16- and 64-bit forms: Slurm's "not set" written as a plain number.
_SENTINELS = frozenset({0xFFFE, 0xFFFF, 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF})
_NO_NODES = frozenset({"", "None assigned", "(null)"})
MAX_HOSTS = 100_000  # a hostlist that expands to more names than this is refused, not expanded


@dataclass(frozen=True)
class SchedulerJob:
    """One job from its scheduler, in the terms fleetwatt matches on: a Slurm allocation from its accounting
    (this module), or a Kubernetes pod from kube-state-metrics (apps.schedulers.kube).

    `exit_code` is the exit status where the job's script exited normally, None where it was killed by a
    signal or the number is unknown; `signal` is the signal that killed it, 0 where none did, None where
    unknown (sacct's ExitCode `N:S`). Times are aware UTC datetimes, None where the scheduler has none.
    `group_key` is what the scheduler groups the job under (`slurm-array/<array job id>` for an array task,
    `k8s/<namespace>/<owner kind>/<owner name>` for a pod), "" where nothing; `labels` are a pod's
    allow-listed labels.
    """

    job_key: str  # slurm/<raw job id> or k8s/<namespace>/<pod>: the agent's key (module docstring)
    job_id: str  # raw job id (JobIDRaw); a pod's uid
    display_id: str  # 6_0 for an array task, 10+1 for a het component, else the raw id; a pod's name
    user: str
    account: str
    partition: str
    qos: str
    name: str
    state: JobState
    state_raw: str  # Slurm's own words: "CANCELLED by 0", "RUNNING,COMPLETING"
    exit_code: int | None
    signal: int | None
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    gpus_requested: int
    gpus_allocated: int
    nodes: tuple[str, ...]
    gpu_indices: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    array_job_id: str | None = None
    array_task_id: int | None = None
    het_job_id: str | None = None
    het_job_offset: int | None = None
    cluster: str = ""
    scheduler: str = "slurm"  # the agent's word for it (Job.scheduler): "slurm" or "k8s"
    group_key: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    namespace: str = ""  # a pod's namespace
    pod: str = ""  # a pod's name

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "gpu_indices", MappingProxyType(dict(self.gpu_indices)))
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def is_stand_in(self) -> bool:
        """slurmdbd's placeholder for a job whose step record came first: named "allocation", no partition,
        no TRES; the job's own record replaces it a moment later (docs/schedulers.md). Read it again later."""
        return self.scheduler == "slurm" and self.name == "allocation" and not self.partition


# --- sacct --json ---------------------------------------------------------------------------------------


def sacct_json_parse(text: str) -> list[SchedulerJob]:
    """The jobs of a `sacct --json` document (Slurm 22.05's writer or the data_parser ones of 23.02+),
    in document order, steps left out. Anything malformed raises `SchedulerDataError`; no partial list."""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise SchedulerDataError(f"sacct --json output is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise SchedulerDataError(f"sacct --json output is a {type(document).__name__}, not an object")
    errors = [e for e in document.get("errors") or [] if not _is_empty_result(e)]
    if errors:
        raise SchedulerDataError(f"sacct --json reported errors: {_error_text(errors)}")
    if "jobs" not in document:
        raise SchedulerDataError("sacct --json output has no 'jobs' list")
    records = document["jobs"]
    if not isinstance(records, list):
        raise SchedulerDataError(f"sacct --json 'jobs' is a {type(records).__name__}, not a list")
    return [_job_parse(record, index) for index, record in enumerate(records)]


# ESLURM_REST_EMPTY_RESULT: Slurm 22.05 reports a window with no jobs as an error ("Nothing found"), with an
# empty jobs list (tests/fixtures/slurm/sacct-json-22.05-nothing-found.json). A quiet window is not a failure.
_EMPTY_RESULT = 9003


def _is_empty_result(error: Any) -> bool:
    return isinstance(error, dict) and error.get("error_number") == _EMPTY_RESULT


def _error_text(errors: Any) -> str:
    if not isinstance(errors, list):
        return repr(errors)
    first = errors[0]
    if isinstance(first, dict):
        text = first.get("description") or first.get("error") or json.dumps(first, sort_keys=True)
    else:
        text = str(first)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return " ".join(str(text).split()) + more


def _job_parse(record: Any, index: int) -> SchedulerJob:
    if not isinstance(record, dict):
        raise SchedulerDataError(f"jobs[{index}] is a {type(record).__name__}, not an object")
    if record.get("job_id") is None:
        raise SchedulerDataError(f"jobs[{index}] has no job_id")
    job_id = _job_id(record["job_id"], f"jobs[{index}].job_id")
    where = f"job {job_id}"

    state, state_raw = _state(record.get("state"), where)
    exit_code, signal = _job_exit(record, state, _batch_step(record, where), where)

    times = _dict(record.get("time"), f"{where} time")
    array = _dict(record.get("array"), f"{where} array")
    het = _dict(record.get("het"), f"{where} het")
    array_job_id = _number(array.get("job_id"), f"{where} array.job_id") or None
    array_task_id = _number(array.get("task_id"), f"{where} array.task_id")
    het_job_id = _number(het.get("job_id"), f"{where} het.job_id") or None
    het_job_offset = _number(het.get("job_offset"), f"{where} het.job_offset")
    display_id = job_id
    if array_job_id:
        task_text = _text(array.get("task"), f"{where} array.task").strip("[]")
        if array_task_id is not None:
            display_id = f"{array_job_id}_{array_task_id}"
        elif task_text:
            display_id = f"{array_job_id}_[{task_text}]"
    elif het_job_id and het_job_offset is not None:
        display_id = f"{het_job_id}+{het_job_offset}"

    nodes = _nodes(record.get("nodes"), where)
    tres = _dict(record.get("tres"), f"{where} tres")
    user = _text(record.get("user"), f"{where} user")
    if not user:
        user = _text(_dict(record.get("association"), f"{where} association").get("user"), f"{where} user")

    return SchedulerJob(
        job_key=f"slurm/{job_id}",
        job_id=job_id,
        display_id=display_id,
        user=user,
        account=_text(record.get("account"), f"{where} account"),
        partition=_text(record.get("partition"), f"{where} partition"),
        qos=_text(record.get("qos"), f"{where} qos"),
        name=_text(record.get("name"), f"{where} name"),
        state=state,
        state_raw=state_raw,
        exit_code=exit_code,
        signal=signal,
        submit=_time(times.get("submission"), f"{where} time.submission"),
        start=_time(times.get("start"), f"{where} time.start"),
        end=_time(times.get("end"), f"{where} time.end"),
        gpus_requested=_gpu_count(tres.get("requested", record.get("tres_req_str")), f"{where} tres.requested"),
        gpus_allocated=_gpu_count(tres.get("allocated", record.get("tres_alloc_str")), f"{where} tres.allocated"),
        nodes=nodes,
        gpu_indices=_gpu_indices(record.get("gres_detail"), nodes, where),
        array_job_id=str(array_job_id) if array_job_id else None,
        array_task_id=array_task_id,
        group_key=f"slurm-array/{array_job_id}" if array_job_id else "",
        het_job_id=str(het_job_id) if het_job_id else None,
        het_job_offset=het_job_offset if het_job_id else None,
        cluster=_text(record.get("cluster"), f"{where} cluster"),
    )


def _job_id(value: Any, where: str) -> str:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return str(int(value))
    number = _number(value, where)
    if number is None or number <= 0:
        raise SchedulerDataError(f"{where} is not a job id: {value!r}")
    return str(number)


def _dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SchedulerDataError(f"{where} is a {type(value).__name__}, not an object")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SchedulerDataError(f"{where} is a {type(value).__name__}, not a string: {value!r}")
    return value


def _number(value: Any, where: str) -> int | None:
    """An integer as Slurm writes it: a plain number or `{"set", "infinite", "number"}`; None where unset,
    infinite or one of Slurm's NO_VAL/INFINITE sentinels."""
    if value is None:
        return None
    if isinstance(value, dict):
        if value.get("set") is False or value.get("infinite") is True:
            return None
        if "number" not in value:
            raise SchedulerDataError(f"{where} is an object without a number: {value!r}")
        return _number(value["number"], where)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchedulerDataError(f"{where} is not a number: {value!r}")
    if value in _SENTINELS:
        return None
    return value


def _time(value: Any, where: str) -> datetime | None:
    seconds = _number(value, where)
    if seconds is None or seconds == 0:
        return None
    if seconds < 0:
        raise SchedulerDataError(f"{where} is a negative time: {seconds}")
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise SchedulerDataError(f"{where} is out of range: {seconds}") from None


# --- states and exit codes ------------------------------------------------------------------------------


def state_normalise(raw: str | list[str] | tuple[str, ...]) -> JobState:
    """Slurm's state text (`CANCELLED by 0`, `TIMEOUT`, `CA`) or list (`["RUNNING", "COMPLETING"]`) as a
    `JobState`: the first base state found; UNKNOWN when there is none or fleetwatt does not tell it apart."""
    words = raw.split() if isinstance(raw, str) else list(raw)
    for word in words:
        found = _BASE_STATES.get(str(word).strip().rstrip("+").upper())
        if found is not None:
            return found
    return JobState.UNKNOWN


def _state(value: Any, where: str) -> tuple[JobState, str]:
    current = value.get("current") if isinstance(value, dict) else value
    if current is None:
        return JobState.UNKNOWN, ""
    if isinstance(current, str):
        return state_normalise(current), current
    if isinstance(current, list) and all(isinstance(word, str) for word in current):
        return state_normalise(current), ",".join(current)
    raise SchedulerDataError(f"{where} state is not a string or a list of strings: {current!r}")


def _job_exit(
    record: dict[str, Any], state: JobState, batch: dict[str, Any] | None, where: str
) -> tuple[int | None, int | None]:
    """(exit code, signal) of a job: its own, else its batch step's; unknown while it pends or runs."""
    if state in (JobState.RUNNING, JobState.PENDING):
        return None, None
    code = _exit_decode(record.get("exit_code"), completed=state is JobState.COMPLETED, where=f"{where} exit_code")
    if code is None and batch is not None:
        step_state, _ = _state(batch.get("state"), f"{where} batch step")
        code = _exit_decode(
            batch.get("exit_code"), completed=step_state is JobState.COMPLETED, where=f"{where} batch step exit_code"
        )
    return code if code is not None else (None, None)


def _batch_step(record: dict[str, Any], where: str) -> dict[str, Any] | None:
    steps = record.get("steps")
    if steps is None:
        return None
    if not isinstance(steps, list):
        raise SchedulerDataError(f"{where} steps is a {type(steps).__name__}, not a list")
    for position, step in enumerate(steps):
        if not isinstance(step, dict):
            raise SchedulerDataError(f"{where} steps[{position}] is a {type(step).__name__}, not an object")
        ident = _dict(step.get("step"), f"{where} steps[{position}].step")
        step_id = str(ident.get("id", ""))
        if step_id == "batch" or step_id.endswith(".batch") or ident.get("name") == "batch":
            return step
    return None


def _exit_decode(value: Any, *, completed: bool, where: str) -> tuple[int | None, int | None] | None:
    """(exit code, signal) from a JSON exit code, or None where it says nothing (absent, pending, invalid).

    A string status is 22.05's writer (and early 23.02's): "SUCCESS" stands for any normal exit, so its
    number is kept only for a COMPLETED job or step. A list status is the later writer: trusted."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SchedulerDataError(f"{where} is a {type(value).__name__}, not an object")
    status = value.get("status")
    signal_value = value.get("signal")
    if isinstance(signal_value, dict):
        signal = _number(signal_value.get("id", signal_value.get("signal_id")), f"{where}.signal")
    else:
        signal = _number(signal_value, f"{where}.signal")
    if isinstance(status, str):
        if status == "SUCCESS":
            return (0 if completed else None), 0
        if status in ("SIGNALED", "CORE_DUMPED"):
            return (None, signal) if signal else None
        if status == "ERROR":
            number = _number(value.get("return_code"), f"{where}.return_code")
            return (number, 0) if number is not None else None
        return None  # PENDING, INVALID: nothing known
    if isinstance(status, list) and all(isinstance(word, str) for word in status):
        words = set(status)
        if words & {"SIGNALED", "CORE_DUMPED"}:
            return (None, signal) if signal else None
        if words & {"SUCCESS", "ERROR"}:
            number = _number(value.get("return_code"), f"{where}.return_code")
            if number is None and "SUCCESS" in words:
                number = 0
            return number, 0
        return None
    if status is None and "return_code" in value:
        number = _number(value.get("return_code"), f"{where}.return_code")
        return (number, 0) if number is not None else None
    raise SchedulerDataError(f"{where} has no readable status: {value!r}")


# --- sacct --parsable2 ----------------------------------------------------------------------------------

_RAW_ID = re.compile(r"[0-9]+(?:\.[A-Za-z0-9_+-]+)?")
_EXIT_CODE = re.compile(r"([0-9]+):([0-9]+)")


def sacct_parsable_exit_codes(text: str) -> dict[str, tuple[int, int]]:
    """{raw job id: (exit code, signal)} from `sacct --parsable2 -o JobIDRaw,ExitCode`, with or without
    `--noheader`. With a header the two columns are found by name among any others (the fixtures' wide
    output); without one the lines must be exactly `JobIDRaw|ExitCode`. Step lines keep their step id
    (`8.batch`); rows with an empty ExitCode are left out."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header = [name.strip().lower() for name in lines[0].split("|")]
    if "jobidraw" in header:
        if "exitcode" not in header:
            raise SchedulerDataError("sacct --parsable2 header has JobIDRaw but no ExitCode column")
        id_column, code_column, width = header.index("jobidraw"), header.index("exitcode"), len(header)
        rows = lines[1:]
        first_row = 2
    elif "jobid" in header or "exitcode" in header:
        raise SchedulerDataError("sacct --parsable2 output needs the JobIDRaw column (JobID names array tasks)")
    else:
        id_column, code_column, width = 0, 1, 2
        rows = lines
        first_row = 1
    codes: dict[str, tuple[int, int]] = {}
    for number, line in enumerate(rows, start=first_row):
        fields = line.split("|")
        if len(fields) == width + 1 and fields[-1] == "":  # --parsable (not 2) ends each line with "|"
            fields.pop()
        if len(fields) != width:
            expected = "JobIDRaw|ExitCode" if width == 2 and first_row == 1 else f"{width} fields"
            raise SchedulerDataError(f"sacct --parsable2 line {number}: expected {expected}, got {line!r}")
        raw_id, code = fields[id_column].strip(), fields[code_column].strip()
        if not _RAW_ID.fullmatch(raw_id):
            raise SchedulerDataError(f"sacct --parsable2 line {number}: not a raw job id: {raw_id!r}")
        if not code:
            continue
        match = _EXIT_CODE.fullmatch(code)
        if match is None:
            raise SchedulerDataError(f"sacct --parsable2 line {number}: ExitCode is not N:S: {code!r}")
        codes[raw_id] = (int(match.group(1)), int(match.group(2)))
    return codes


def exit_codes_apply(jobs: Iterable[SchedulerJob], codes: Mapping[str, tuple[int, int]]) -> list[SchedulerJob]:
    """The jobs with their exit code and signal from sacct's ExitCode (`sacct_parsable_exit_codes`): the
    job's own line, else its batch step's (`<id>.batch`). A job with neither keeps what the JSON said (None
    where that was unknown); a pending or running job has no exit code yet and is left as it is."""
    fixed = []
    for job in jobs:
        found = codes.get(job.job_id) or codes.get(f"{job.job_id}.batch")
        if found is None or job.state in (JobState.RUNNING, JobState.PENDING):
            fixed.append(job)
            continue
        exit_code, signal = found
        fixed.append(replace(job, exit_code=None if signal else exit_code, signal=signal))
    return fixed


# --- TRES and GRES --------------------------------------------------------------------------------------


def _gpu_count(tres: Any, where: str) -> int:
    """GPUs in a TRES list (`{"type": "gres", "name": "gpu", "count": 2}`) or string (`gres/gpu=2`): the
    untyped total, else the sum of the typed counts (`gres/gpu:a100`); 0 where there are none."""
    if tres is None:
        return 0
    counts: dict[str, int] = {}
    if isinstance(tres, str):
        for item in tres.split(","):
            name, _, count = item.strip().partition("=")
            if name == "gres/gpu" or name.startswith("gres/gpu:"):
                if not count.isdigit():
                    raise SchedulerDataError(f"{where}: GPU count is not a number: {item!r}")
                counts[name.removeprefix("gres/")] = int(count)
    elif isinstance(tres, list):
        for position, item in enumerate(tres):
            if not isinstance(item, dict):
                raise SchedulerDataError(f"{where}[{position}] is a {type(item).__name__}, not an object")
            name = item.get("name") or ""
            if item.get("type") == "gres" and isinstance(name, str) and (name == "gpu" or name.startswith("gpu:")):
                counts[name] = _number(item.get("count"), f"{where}[{position}].count") or 0
    else:
        raise SchedulerDataError(f"{where} is a {type(tres).__name__}, not a TRES list or string")
    if "gpu" in counts:
        return counts["gpu"]
    return sum(counts.values())


_GPU_IDX = re.compile(r"(?:^|,)gpu(?::[^,(]*)?(?:\(CNT:\d+\))?\(IDX:([^)]*)\)")


def gres_gpu_indices(detail: str) -> tuple[int, ...]:
    """The GPU indexes in one node's GRES detail: `gpu:2(IDX:0-1)` → (0, 1), `gpu:a100:3(IDX:0,2-3)` →
    (0, 2, 3); other GRES are ignored, `IDX:N/A` gives ()."""
    indices: list[int] = []
    for match in _GPU_IDX.finditer(detail):
        spec = match.group(1).strip()
        if spec in ("", "N/A"):
            continue
        for piece in spec.split(","):
            low, _, high = piece.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise SchedulerDataError(f"GRES detail has a bad GPU index range: {detail!r}")
            indices.extend(range(int(low), int(high or low) + 1))
    return tuple(indices)


def _gpu_indices(detail: Any, nodes: tuple[str, ...], where: str) -> dict[str, tuple[int, ...]]:
    if detail is None:
        return {}
    if not isinstance(detail, list) or not all(isinstance(item, str) for item in detail):
        raise SchedulerDataError(f"{where} gres_detail is not a list of strings: {detail!r}")
    if not detail:
        return {}
    if len(detail) != len(nodes):
        raise SchedulerDataError(f"{where} gres_detail has {len(detail)} entries for {len(nodes)} nodes")
    found = {node: gres_gpu_indices(item) for node, item in zip(nodes, detail, strict=True)}
    return {node: indices for node, indices in found.items() if indices}


# --- hostlists ------------------------------------------------------------------------------------------


def _nodes(value: Any, where: str) -> tuple[str, ...]:
    text = _text(value, f"{where} nodes").strip()
    if text in _NO_NODES:
        return ()
    try:
        return tuple(hostlist_expand(text))
    except HostlistError as exc:
        raise HostlistError(f"{where} nodes: {exc}") from None


def hostlist_expand(text: str) -> list[str]:
    """Slurm's hostlist syntax expanded: `gpu[01-03,07]` → gpu01, gpu02, gpu03, gpu07.

    Names are separated by commas outside brackets or by whitespace; a bracket holds numbers and ranges
    separated by commas; a range is padded to the width of its low end (`[08-10]` → 08 09 10, `[8-010]` →
    8 9 10); a single number is kept as written. Text may follow a bracket (`n[1-2]-ib` → n1-ib n2-ib), and
    several brackets in one name give every combination, the first bracket varying slowest (Slurm orders
    three or more brackets differently; the set of names is the same). Duplicates are kept. Empty
    brackets, empty ranges, descending ranges, steps (`1-9:2`), letters and unclosed or nested brackets
    raise `HostlistError`, as does a list of more than MAX_HOSTS names.
    """
    names: list[str] = []
    for item in _hostlist_items(text):
        names.extend(_hostlist_item_expand(item, limit=MAX_HOSTS - len(names)))
    return names


def _hostlist_items(text: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    inside = False
    for char in text:
        if char == "[":
            if inside:
                raise HostlistError(f"nested '[' in hostlist {text!r}")
            inside = True
        elif char == "]":
            if not inside:
                raise HostlistError(f"']' without '[' in hostlist {text!r}")
            inside = False
        elif not inside and (char == "," or char.isspace()):
            if current:
                items.append("".join(current))
                current = []
            continue
        elif inside and char.isspace():
            raise HostlistError(f"space inside brackets in hostlist {text!r}")
        current.append(char)
    if inside:
        raise HostlistError(f"unclosed '[' in hostlist {text!r}")
    if current:
        items.append("".join(current))
    return items


_BRACKET = re.compile(r"\[([^\]]*)\]")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _hostlist_item_expand(item: str, *, limit: int) -> list[str]:
    parts = _BRACKET.split(item)  # literal, bracket, literal, bracket, ..., literal
    choices: list[list[str]] = []
    total = 1
    for position, part in enumerate(parts):
        if position % 2 == 0:
            choices.append([part])
            continue
        numbers = _bracket_expand(part, item, limit=limit)
        total *= len(numbers)
        if total > limit:
            break
        choices.append(numbers)
    if total > limit:
        raise HostlistError(f"hostlist {item!r} makes the list longer than {MAX_HOSTS} names")
    return ["".join(combination) for combination in itertools.product(*choices)]


def _bracket_expand(spec: str, item: str, *, limit: int) -> list[str]:
    if not spec:
        raise HostlistError(f"empty brackets in hostlist {item!r}")
    numbers: list[str] = []
    for piece in spec.split(","):
        match = _RANGE.fullmatch(piece)
        if match is None:
            raise HostlistError(f"{piece!r} is not a number or a range in hostlist {item!r}")
        low, high = match.group(1), match.group(2)
        if high is None:
            numbers.append(low)
            continue
        first, last = int(low), int(high)
        if first > last:
            raise HostlistError(f"descending range {piece!r} in hostlist {item!r}")
        if last - first + 1 + len(numbers) > limit:
            raise HostlistError(f"hostlist {item!r} makes the list longer than {MAX_HOSTS} names")
        width = len(low)
        numbers.extend(str(number).zfill(width) for number in range(first, last + 1))
    return numbers
