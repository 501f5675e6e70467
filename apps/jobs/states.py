"""A job's state as its scheduler last reported it (pure; DESIGN section 8).

Defined once here: the model's choices, the API's filter and help, and which states count as a failed run
all come from this list. `unknown` is the state of a job no scheduler record describes (the agent saw it,
the scheduler was not read, or has no record of it).
"""

from __future__ import annotations

import signal as signals
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class StateInfo:
    label: str
    meaning: str


class JobState(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    NODE_FAIL = "node_fail"
    PREEMPTED = "preempted"
    RUNNING = "running"
    PENDING = "pending"
    UNKNOWN = "unknown"

    @property
    def info(self) -> StateInfo:
        return STATE_INFO[self]

    @property
    def label(self) -> str:
        return self.info.label

    @property
    def is_failed_run(self) -> bool:
        return self in FAILED_RUN_STATES


STATE_INFO: dict[JobState, StateInfo] = {
    JobState.COMPLETED: StateInfo("Completed", "Ran to the end and exited 0."),
    JobState.FAILED: StateInfo("Failed", "Its script exited with a non-zero code."),
    JobState.CANCELLED: StateInfo("Cancelled", "Cancelled by its user or an admin (scancel)."),
    JobState.TIMEOUT: StateInfo("Timed out", "Killed at the end of its time limit."),
    JobState.OUT_OF_MEMORY: StateInfo("Out of memory", "Killed for using more memory than it was given."),
    JobState.NODE_FAIL: StateInfo("Node failure", "Ended because a node it ran on failed."),
    JobState.PREEMPTED: StateInfo("Preempted", "Stopped to make room for a job of higher priority."),
    JobState.RUNNING: StateInfo("Running", "Holds its allocation now."),
    JobState.PENDING: StateInfo("Pending", "Waiting in the queue for resources."),
    JobState.UNKNOWN: StateInfo("Unknown", "No scheduler record describes it (yet)."),
}

# Runs whose GPU time bought no result: the job's own failure, or the cluster's. A cancelled or preempted
# job was stopped on purpose, a completed one succeeded.
FAILED_RUN_STATES = frozenset({JobState.FAILED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL})


@dataclass(frozen=True)
class OutcomeInfo:
    label: str
    meaning: str
    states: tuple[JobState, ...]


# How a run ended, as a job group's split shows it: from the job's state (apps.jobs.states), in this order.
# The failed ones are the failed runs of the waste findings (FAILED_RUN_STATES).
OUTCOMES: dict[str, OutcomeInfo] = {
    "completed": OutcomeInfo("Completed", "Ran to the end and exited 0: what was delivered.", (JobState.COMPLETED,)),
    "failed": OutcomeInfo(
        "Failed",
        "Failed, timed out, ran out of memory or lost a node: GPU time that bought no result.",
        tuple(s for s in JobState if s in FAILED_RUN_STATES),
    ),
    "cancelled": OutcomeInfo(
        "Cancelled or preempted", "Stopped on purpose before its end.", (JobState.CANCELLED, JobState.PREEMPTED)
    ),
    "other": OutcomeInfo(
        "Running or unknown",
        "Still running or pending, or no scheduler record says how it ended.",
        (JobState.RUNNING, JobState.PENDING, JobState.UNKNOWN),
    ),
}

STATE_CHOICES = [(s.value, s.label) for s in JobState]
STATES = tuple(s.value for s in JobState)


def state_help() -> str:
    """One line per state, for the API's description of the field and its filter."""
    return "; ".join(f"{s.value}: {s.info.meaning.rstrip('.')}" for s in JobState) + "."


# Slurm ends an out-of-memory run with its own code, SIG_OOM (253), which sacct shows as the signal
# 253 & 0x7f = 125 (`0:125`): no signal of the operating system.
SLURM_OOM_SIGNAL = 125
# What the state alone says of how a run ended, where the exit code and signal would mislead: a timed-out
# run's script often "exited 0" after Slurm's SIGTERM, a lost node's job has no exit of its own.
_ENDED_BY_STATE = {
    JobState.OUT_OF_MEMORY: "ran out of memory (killed)",
    JobState.TIMEOUT: "killed at its time limit",
    JobState.NODE_FAIL: "ended by the failure of its node",
    JobState.PREEMPTED: "preempted (stopped for a job of higher priority)",
}


def exit_text(state: str, exit_code: int | None, signal: int | None) -> str:
    """How a run ended, in words: `failed`, 3 → "exit code 3"; `failed`, signal 9 → "killed by signal 9
    (Killed)"; `out_of_memory`, 0:125 → "ran out of memory (killed)"; `timeout` → "killed at its time limit"."""
    try:
        known = JobState(state)
    except ValueError:
        known = JobState.UNKNOWN
    if known in (JobState.RUNNING, JobState.PENDING):
        return "none yet"
    if known in _ENDED_BY_STATE:
        return _ENDED_BY_STATE[known]
    if signal == SLURM_OOM_SIGNAL:
        return _ENDED_BY_STATE[JobState.OUT_OF_MEMORY]
    if signal:
        name = _signal_name(signal)
        return f"{'cancelled, ' if known is JobState.CANCELLED else ''}killed by signal {signal}" + (
            f" ({name})" if name else ""
        )
    if known is JobState.CANCELLED:
        return "cancelled" + (f", exit code {exit_code}" if exit_code else "")
    return f"exit code {exit_code}" if exit_code is not None else "unknown"


def _signal_name(number: int) -> str:
    try:
        return signals.strsignal(number) or ""
    except ValueError:
        return ""
