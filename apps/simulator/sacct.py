"""Slurm's accounting of a simulated fleet: what Slurm 22.05's `sacct` prints for a scenario's Slurm jobs.

The demo's week of history is simulated (apps.simulator.engine), so no real Slurm ran its jobs; its scheduler
sync reads this instead (`manage.py simulate_sacct`, docs/schedulers.md, "The demo's accounting"). Pure: a
scenario, a window and a moment in, text out.

What it prints is what a real 22.05.8 prints, in the shape of the recorded output (tests/fixtures/slurm/):

- `sacct --json -a -S -E`: the openapi/dbv0.0.38 document (meta, errors, jobs[]), every job with the fields the
  recorded jobs have and no other, a batch step under each job that started (`-X`: no steps), and 22.05's
  exit-code bug: a normal exit reads `{"status": "SUCCESS", "return_code": 0}` whatever its number; only signals
  come through. Empty lists and objects, escaped slashes and the missing final newline are sacct's too.
- `sacct --parsable2 [--noheader] [-X] -o FIELDS -a -S -E`: one line per job (and per batch step without `-X`),
  ExitCode `N:S` right.

Which jobs a window holds, as sacct's `-S`/`-E` without `--state` (docs/schedulers.md): the jobs eligible
before the window's end that had not ended before its start; a job not ended at `now` has no end. A job is
accounted from its submission (a minute before its start unless the scenario says when), PENDING until its
start, RUNNING until its end (and for good when its end is at or after the scenario's end), then in the state
the scenario gives it, with the exit Slurm writes for that state unless the scenario gives one:

| state | ExitCode | batch step |
| --- | --- | --- |
| COMPLETED | 0:0 | COMPLETED 0:0 |
| FAILED | 1:0 (or the scenario's `exit_code`) | FAILED, the same |
| CANCELLED, PREEMPTED | 0:0 | CANCELLED 0:15 (SIGTERM) |
| TIMEOUT | 0:0 | CANCELLED 0:15 |
| OUT_OF_MEMORY | 0:125 | OUT_OF_MEMORY 0:125 |
| NODE_FAIL | 0:0 | NODE_FAIL 0:0 |

A scenario's `signal` replaces the signal of the job and its step (`0:9`: killed). Job ids are the scenario's
(numbers: the raw ids the agent names its jobs by, `slurm/<id>`); each job runs on one node.
"""

from __future__ import annotations

import json
import re
import signal as signals
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from .scenario import JobSpec, Scenario

SLURM_VERSION = {"major": 22, "micro": 8, "minor": 5}
SLURM_RELEASE = "22.05.8"
META = {
    "plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"},
    "Slurm": {"version": SLURM_VERSION, "release": SLURM_RELEASE},
}
SUBMIT_LEAD_S = 60  # a job without a submit time was submitted this long before its start
CPUS_PER_GPU = 12
MEMORY_MB_PER_CPU = 8000
PRIORITY_BASE = 4294901760  # 22.05's priorities of the recorded jobs count down from just under this

# The scenario's ending (apps.simulator.scenario.JOB_STATES) as Slurm writes it, with its exit (N:S) when the
# scenario gives none, and its batch step's state and signal.
_ENDINGS: dict[str, tuple[str, tuple[int, int], tuple[str, int]]] = {
    "completed": ("COMPLETED", (0, 0), ("COMPLETED", 0)),
    "failed": ("FAILED", (1, 0), ("FAILED", 0)),
    "cancelled": ("CANCELLED", (0, 0), ("CANCELLED", 15)),
    "timeout": ("TIMEOUT", (0, 0), ("CANCELLED", 15)),
    "out_of_memory": ("OUT_OF_MEMORY", (0, 125), ("OUT_OF_MEMORY", 125)),
    "node_fail": ("NODE_FAIL", (0, 0), ("NODE_FAIL", 0)),
    "preempted": ("PREEMPTED", (0, 0), ("CANCELLED", 15)),
}


class SacctUsageError(ValueError):
    """A request sacct itself would refuse (a bad time, an unknown field); the message is sacct's line."""


@dataclass(frozen=True)
class AccountingRecord:
    """One Slurm job as its accounting describes it at a moment. Times are epoch seconds; 0 where not reached
    yet (as slurmdbd keeps them): `start` while pending, `end` while pending or running."""

    spec: JobSpec
    job_id: int
    state: str  # Slurm's word: COMPLETED, FAILED, ..., RUNNING, PENDING
    submit: int
    start: int
    end: int
    exit_code: int  # sacct's ExitCode N:S
    signal: int
    step_state: str  # the batch step's state ("" without a step: pending)
    step_signal: int
    gpus_requested: int
    gpus_allocated: int
    time_limit_min: int | None  # None: UNLIMITED

    @property
    def started(self) -> bool:
        return self.start > 0

    @property
    def eligible(self) -> int:
        return self.submit

    @property
    def node(self) -> str:
        return self.spec.node if self.started else ""

    @property
    def cpus(self) -> int:
        return CPUS_PER_GPU * max(1, self.gpus_requested)

    def elapsed(self, now: int) -> int:
        if not self.started:
            return 0
        return (self.end or now) - self.start


def accounting_records(scenario: Scenario, *, now: datetime) -> list[AccountingRecord]:
    """Every Slurm job of the scenario submitted by `now`, as its accounting reads at `now`, by job id."""
    t0, moment = int(scenario.t0), now.timestamp()
    records = []
    for spec in scenario.jobs:
        if spec.scheduler != "slurm":
            continue
        if not spec.job_id.isdigit():
            raise ValueError(f"Slurm job {spec.job_id!r}: a simulated Slurm job's id is a number (its raw id)")
        submit = t0 + (spec.submit_s if spec.submit_s is not None else spec.start_s - SUBMIT_LEAD_S)
        start, end = t0 + spec.start_s, t0 + spec.end_s
        if moment < submit:
            continue
        gpus = len(spec.gpus)
        limit: int | None = None
        if moment < start:  # pending: nothing allocated yet
            state, (code, signal), (step_state, step_signal) = "PENDING", (0, 0), ("", 0)
            start = end = gpus = 0
        elif moment < end or spec.end_s >= scenario.duration_s:  # running: no end yet
            state, (code, signal), (step_state, step_signal) = "RUNNING", (0, 0), ("RUNNING", 0)
            end = 0
        else:
            state, (code, signal), (step_state, step_signal) = _ENDINGS[spec.state]
            if spec.exit_code is not None:
                code = spec.exit_code
            if spec.signal:
                signal = step_signal = spec.signal
            if state == "TIMEOUT":
                limit = max(1, (end - start) // 60)
        records.append(
            AccountingRecord(
                spec=spec,
                job_id=int(spec.job_id),
                state=state,
                submit=submit,
                start=start,
                end=end,
                exit_code=0 if signal else code,
                signal=signal,
                step_state=step_state,
                step_signal=step_signal,
                gpus_requested=spec.gpus_requested if spec.gpus_requested is not None else len(spec.gpus),
                gpus_allocated=gpus,
                time_limit_min=limit,
            )
        )
    return sorted(records, key=lambda r: r.job_id)


def records_select(
    records: Iterable[AccountingRecord],
    *,
    start: datetime | None,
    end: datetime,
    job_ids: Sequence[int] = (),
) -> list[AccountingRecord]:
    """The records sacct's `-S start -E end` (and `-j ids`) show: eligible before `end`, not ended before
    `start` (a record with no end has not ended); with `job_ids` only those, and no start limit unless given."""
    first = start.timestamp() if start is not None else None
    last = end.timestamp()
    wanted = set(job_ids)
    return [
        r
        for r in records
        if (not wanted or r.job_id in wanted) and r.eligible < last and (first is None or r.end == 0 or r.end >= first)
    ]


# --- sacct's times ---------------------------------------------------------------------------------------

_NOW = re.compile(r"now(?:([+-])(\d+)(seconds|minutes|hours|days|weeks)?)?", re.IGNORECASE)
_UNITS_S = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
_WALL_CLOCK = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d")


def sacct_time_parse(text: str, *, now: datetime, zone: tzinfo | None = None) -> datetime:
    """A time as sacct's `-S`/`-E` read it: wall-clock `YYYY-MM-DD[THH:MM[:SS]]` in the local zone (`zone`;
    None: the process's, from TZ), or `now[{+|-}count[seconds|minutes|hours|days|weeks]]`. Neither epoch
    seconds nor an offset: SacctUsageError, with sacct's words."""
    value = text.strip()
    match = _NOW.fullmatch(value)
    if match:
        if not match.group(1):
            return now
        seconds = int(match.group(2)) * _UNITS_S[(match.group(3) or "seconds").lower()]
        return now + timedelta(seconds=seconds if match.group(1) == "+" else -seconds)
    for pattern in _WALL_CLOCK:
        try:
            wall = datetime.strptime(value, pattern)  # noqa: DTZ007 (sacct reads local wall-clock time)
        except ValueError:
            continue
        return wall.replace(tzinfo=zone).astimezone(UTC) if zone is not None else wall.astimezone(UTC)
    raise SacctUsageError(f"sacct: error: Invalid time specification (pos=0): {text}")


def _wall_clock(epoch: int, zone: tzinfo | None) -> str:
    if not epoch:
        return "Unknown"
    moment = datetime.fromtimestamp(epoch, tz=UTC)
    return (moment.astimezone(zone) if zone is not None else moment.astimezone()).strftime("%Y-%m-%dT%H:%M:%S")


# --- sacct --json ----------------------------------------------------------------------------------------


def _tres(kind: str, type_id: int, count: int | None, name: str | None = None) -> dict[str, Any]:
    return {"type": kind, "name": name, "id": type_id, "count": count}


def _exit_json(signal: int) -> dict[str, Any]:
    """22.05's writer: any normal exit is SUCCESS with return code 0; a signal comes through."""
    if not signal:
        return {"status": "SUCCESS", "return_code": 0}
    return {
        "status": "SIGNALED",
        "return_code": None,
        "signal": {"signal_id": signal, "name": _signal_name(signal)},
    }


def _signal_name(number: int) -> str:
    """strsignal(3)'s words, as Slurm writes them ("Terminated"); glibc's for a number past the last signal."""
    try:
        name = signals.strsignal(number)
    except ValueError:
        name = None
    return name or f"Unknown signal {number}"


def _cpu_seconds() -> dict[str, int]:
    return {"seconds": 0, "microseconds": 0}  # jobacct_gather/none: no usage statistics


def _batch_step(r: AccountingRecord, now: int) -> dict[str, Any]:
    allocated = [
        _tres("cpu", 1, r.cpus),
        _tres("mem", 2, 0),
        _tres("node", 4, 1),
        _tres("gres", 1001, r.gpus_allocated, "gpu"),
    ]
    empty: dict[str, list[Any]] = {"max": [], "min": [], "average": [], "total": []}
    return {
        "nodes": {"list": [r.node], "count": 1, "range": r.node},
        "tres": {"requested": empty, "consumed": dict(empty), "allocated": allocated},
        "time": {
            "elapsed": r.elapsed(now),
            "end": r.end,
            "start": r.start,
            "suspended": 0,
            "system": _cpu_seconds(),
            "total": _cpu_seconds(),
            "user": _cpu_seconds(),
        },
        "exit_code": _exit_json(r.step_signal),
        "tasks": {"count": 1},
        "pid": None,
        "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": []},
        "kill_request_user": None,
        "state": r.step_state,
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {"job_id": r.job_id, "het": {"component": None}, "id": "batch", "name": "batch"},
        "task": {"distribution": "Unknown"},
    }


def _job_json(r: AccountingRecord, *, cluster: str, now: int, steps: bool) -> dict[str, Any]:
    spec = r.spec
    requested = [
        _tres("cpu", 1, r.cpus),
        _tres("mem", 2, r.cpus * MEMORY_MB_PER_CPU),
        _tres("node", 4, 1),
        _tres("billing", 5, r.cpus),
        _tres("gres", 1001, r.gpus_requested, "gpu"),
    ]
    allocated = (
        [
            _tres("cpu", 1, r.cpus),
            _tres("energy", 3, None),
            _tres("node", 4, 1),
            _tres("billing", 5, r.cpus),
            _tres("gres", 1001, r.gpus_allocated, "gpu"),
        ]
        if r.started
        else []
    )
    return {
        "account": spec.account,
        "comment": {"administrator": None, "job": None, "system": None},
        "allocation_nodes": 1 if r.started else 0,
        "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task": None, "task_id": None},
        "association": {"account": spec.account, "cluster": cluster, "partition": None, "user": spec.user},
        "cluster": cluster,
        "constraints": "",
        "container": None,
        "derived_exit_code": {"status": "SUCCESS", "return_code": 0},
        "time": {
            "elapsed": r.elapsed(now),
            "eligible": r.eligible,
            "end": r.end,
            "start": r.start,
            "submission": r.submit,
            "suspended": 0,
            "system": _cpu_seconds(),
            "limit": r.time_limit_min,
            "total": _cpu_seconds(),
            "user": _cpu_seconds(),
        },
        "exit_code": _exit_json(r.signal),
        "flags": ["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"] if r.started else [],
        "group": spec.user,
        "het": {"job_id": 0, "job_offset": None},
        "job_id": r.job_id,
        "name": spec.name,
        "mcs": {"label": ""},
        "nodes": r.node or "None assigned",
        "partition": spec.partition,
        "priority": PRIORITY_BASE - r.job_id % 65536,
        "qos": spec.qos,
        "required": {"CPUs": r.cpus, "memory": r.cpus * MEMORY_MB_PER_CPU},
        "kill_request_user": spec.user if r.state == "CANCELLED" else None,
        "reservation": {"id": 0, "name": 0},
        "state": {"current": r.state, "reason": "Priority" if r.state == "PENDING" else "None"},
        "steps": [_batch_step(r, now)] if steps and r.started else [],
        "tres": {"allocated": allocated, "requested": requested},
        "user": spec.user,
        "wckey": {"wckey": "", "flags": []},
        "working_directory": f"/home/{spec.user}" if spec.user else "/",
    }


def sacct_json_render(
    records: Iterable[AccountingRecord], *, cluster: str, now: datetime, allocations_only: bool = False
) -> str:
    """`sacct --json` of the records (`-X`: no steps), as 22.05 writes it."""
    at = int(now.timestamp())
    document = {
        "meta": META,
        "errors": [],
        "jobs": [_job_json(r, cluster=cluster, now=at, steps=not allocations_only) for r in records],
    }
    return _slurm_json(document, 0)


def _slurm_json(value: Any, depth: int) -> str:
    """JSON as Slurm's serializer prints it: two-space indents, `[\\n  ]` for an empty list, `\\/` for `/`."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{\n" + pad + "}"
        items = [f"{inner}{_slurm_json(str(k), 0)}: {_slurm_json(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[\n" + pad + "]"
        return "[\n" + ",\n".join(inner + _slurm_json(v, depth + 1) for v in value) + "\n" + pad + "]"
    return json.dumps(value).replace("/", "\\/")


# --- sacct --parsable2 -----------------------------------------------------------------------------------

DEFAULT_FIELDS = ("JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode")
_FIELD_NAMES = {
    name.lower(): name
    for name in (
        "JobID", "JobIDRaw", "JobName", "Account", "User", "Cluster", "Partition", "QOS", "State", "ExitCode",
        "DerivedExitCode", "Submit", "Eligible", "Start", "End", "ElapsedRaw", "TimelimitRaw", "NNodes", "NodeList",
        "AllocCPUS", "AllocTRES", "ReqTRES",
    )
}  # fmt: skip


def sacct_fields(text: str | None) -> list[str]:
    """`-o`'s comma-separated fields (any case, `%width` ignored) by their sacct names; SacctUsageError for
    one this simulation does not print."""
    if text is None:
        return list(DEFAULT_FIELDS)
    fields = []
    for item in text.split(","):
        name = item.split("%", 1)[0].strip()
        if not name:
            continue
        known = _FIELD_NAMES.get(name.lower())
        if known is None:
            raise SacctUsageError(f'sacct: error: Invalid field requested: "{name}"')
        fields.append(known)
    return fields


def _tres_text(r: AccountingRecord, *, allocated: bool, step: bool = False) -> str:
    if allocated and not r.started:
        return ""
    if step:
        return f"cpu={r.cpus},gres/gpu={r.gpus_allocated},mem=0,node=1"
    gpus = r.gpus_allocated if allocated else r.gpus_requested
    memory = "" if allocated else f"mem={r.cpus * MEMORY_MB_PER_CPU}M,"
    return f"billing={r.cpus},cpu={r.cpus},gres/gpu={gpus},{memory}node=1"


def _row(r: AccountingRecord, field: str, *, cluster: str, zone: tzinfo | None, now: int, step: bool) -> str:
    if r.state in ("RUNNING", "PENDING"):
        exit_of = "0:0"
    elif step:
        exit_of = f"0:{r.step_signal}" if r.step_signal else f"{r.exit_code}:0"
    else:
        exit_of = f"{r.exit_code}:{r.signal}"
    state = r.step_state if step else r.state
    if state == "CANCELLED" and not step:
        state = "CANCELLED by 0"
    values = {
        "JobID": f"{r.job_id}.batch" if step else str(r.job_id),
        "JobIDRaw": f"{r.job_id}.batch" if step else str(r.job_id),
        "JobName": "batch" if step else r.spec.name,
        "Account": r.spec.account,
        "User": "" if step else r.spec.user,
        "Cluster": cluster,
        "Partition": "" if step else r.spec.partition,
        "QOS": "" if step else r.spec.qos,
        "State": state,
        "ExitCode": exit_of,
        "DerivedExitCode": "" if step else "0:0",
        "Submit": _wall_clock(r.start if step else r.submit, zone),
        "Eligible": _wall_clock(r.start if step else r.eligible, zone),
        "Start": _wall_clock(r.start, zone),
        "End": _wall_clock(r.end, zone),
        "ElapsedRaw": str(r.elapsed(now)),
        "NNodes": "1",
        "NodeList": r.node or "None assigned",
        "TimelimitRaw": "" if step else str(r.time_limit_min or "UNLIMITED"),
        "AllocCPUS": str(r.cpus),
        "AllocTRES": _tres_text(r, allocated=True, step=step),
        "ReqTRES": "" if step else _tres_text(r, allocated=False),
    }
    return values[field]


def sacct_parsable_render(
    records: Iterable[AccountingRecord],
    *,
    fields: Sequence[str],
    cluster: str,
    now: datetime,
    header: bool = True,
    allocations_only: bool = False,
    zone: tzinfo | None = None,
) -> str:
    """`sacct --parsable2 -o FIELDS` of the records: a header line unless `--noheader`, each job's line and,
    without `-X`, its batch step's (`<id>.batch`). Times in the local zone (`zone`; None: the process's)."""
    at = int(now.timestamp())
    lines = ["|".join(fields)] if header else []
    for r in records:
        lines.append("|".join(_row(r, f, cluster=cluster, zone=zone, now=at, step=False) for f in fields))
        if not allocations_only and r.started:
            lines.append("|".join(_row(r, f, cluster=cluster, zone=zone, now=at, step=True) for f in fields))
    return "".join(line + "\n" for line in lines)
