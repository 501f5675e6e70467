"""A job's state (apps/jobs/states.py, pure): each state described once, the failed runs, the outcomes that split a
job group's runs (every state in exactly one), and how a run ended in words. Slurm's own records read through it:
tests/jobs/test_exit_text.py."""

from __future__ import annotations

import pytest

from apps.jobs.states import (
    FAILED_RUN_STATES,
    OUTCOMES,
    SLURM_OOM_SIGNAL,
    STATE_CHOICES,
    STATE_INFO,
    STATES,
    JobState,
    exit_text,
    state_help,
)


def test_every_state_is_described_once() -> None:
    assert set(STATE_INFO) == set(JobState)
    assert STATES == tuple(s.value for s in JobState) == tuple(v for v, _ in STATE_CHOICES)
    assert JobState.OUT_OF_MEMORY.label == "Out of memory"


def test_a_failed_run_bought_no_result_and_a_stopped_one_is_not_failed() -> None:
    assert {s for s in JobState if s.is_failed_run} == FAILED_RUN_STATES
    assert not JobState.CANCELLED.is_failed_run and not JobState.PREEMPTED.is_failed_run
    assert not JobState.COMPLETED.is_failed_run and JobState.NODE_FAIL.is_failed_run


def test_the_outcomes_split_every_state_exactly_once() -> None:
    placed = [s for info in OUTCOMES.values() for s in info.states]
    assert sorted(placed) == sorted(JobState)
    assert set(OUTCOMES["failed"].states) == FAILED_RUN_STATES
    assert list(OUTCOMES) == ["completed", "failed", "cancelled", "other"]


def test_the_help_has_a_line_per_state() -> None:
    text = state_help()
    assert text.count("; ") == len(JobState) - 1 and text.endswith(".")
    assert "timeout: Killed at the end of its time limit;" in text


@pytest.mark.parametrize(
    ("state", "exit_code", "signal", "text"),
    [
        ("running", None, None, "none yet"),
        ("pending", 0, 0, "none yet"),
        ("completed", 0, 0, "exit code 0"),
        ("failed", 3, 0, "exit code 3"),
        ("failed", None, 9, "killed by signal 9 (Killed)"),
        ("failed", 0, SLURM_OOM_SIGNAL, "ran out of memory (killed)"),  # Slurm's own code, no OS signal
        ("timeout", 0, 15, "killed at its time limit"),  # the state says more than the script's exit
        ("node_fail", None, None, "ended by the failure of its node"),
        ("cancelled", 0, 0, "cancelled"),
        ("cancelled", 1, 0, "cancelled, exit code 1"),
        ("cancelled", None, 15, "cancelled, killed by signal 15 (Terminated)"),
        ("unknown", None, None, "unknown"),
        ("no-such-state", 2, None, "exit code 2"),  # read as unknown
        ("failed", None, 99, "killed by signal 99"),  # a number no signal has: no name
    ],
)
def test_how_a_run_ended_in_words(state: str, exit_code: int | None, signal: int | None, text: str) -> None:
    assert exit_text(state, exit_code, signal) == text
