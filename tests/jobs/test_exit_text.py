"""How a run ended, in words (apps.jobs.states.exit_text): from the state, exit code and signal as sacct gives
them, the local Slurm's recorded output (tests/fixtures/slurm) and the ExitCode Slurm writes for each end."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.jobs.states import JobState, exit_text
from apps.schedulers.slurm import exit_codes_apply, sacct_json_parse, sacct_parsable_exit_codes

SLURM = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


@pytest.mark.parametrize(
    ("state", "exit_code", "signal", "text"),
    [
        ("completed", 0, 0, "exit code 0"),
        ("failed", 3, 0, "exit code 3"),
        ("failed", None, 9, "killed by signal 9 (Killed)"),
        ("failed", None, 125, "ran out of memory (killed)"),  # Slurm's SIG_OOM without its state
        ("out_of_memory", 0, 125, "ran out of memory (killed)"),
        ("out_of_memory", None, 9, "ran out of memory (killed)"),  # Kubernetes' OOMKilled
        ("timeout", 0, 0, "killed at its time limit"),
        ("timeout", None, 15, "killed at its time limit"),
        ("node_fail", 0, 0, "ended by the failure of its node"),
        ("preempted", 0, 0, "preempted (stopped for a job of higher priority)"),
        ("cancelled", 0, 0, "cancelled"),
        ("cancelled", None, 15, "cancelled, killed by signal 15 (Terminated)"),
        ("running", None, None, "none yet"),
        ("pending", None, None, "none yet"),
        ("unknown", None, None, "unknown"),
        ("unknown", None, 200, "killed by signal 200"),  # no such signal: the number alone
        ("bogus", 1, 0, "exit code 1"),
    ],
)
def test_exit_text(state: str, exit_code: int | None, signal: int | None, text: str) -> None:
    assert exit_text(state, exit_code, signal) == text


def test_the_local_slurm_s_recorded_runs_read_as_what_happened() -> None:
    # given sacct's real output of the local Slurm 22.05 (its README says what each job did)
    jobs = sacct_json_parse((SLURM / "sacct-json-22.05.json").read_text())
    codes = sacct_parsable_exit_codes((SLURM / "sacct-parsable-22.05.txt").read_text())
    ended = {
        job.job_id: exit_text(JobState(job.state.value.lower()), job.exit_code, job.signal)
        for job in exit_codes_apply(jobs, codes)
    }
    # then the run killed at its 1-minute limit is not "exit 0", and the script's own exit 3 is its code
    assert ended["1"] == "killed at its time limit"
    assert ended["3"] == "exit code 3"
    assert ended["2"] == "exit code 0"
    assert ended["5"].startswith("cancelled")


@pytest.mark.parametrize(
    ("state", "exit_code_column", "text"),
    [
        # sacct's State and ExitCode columns as Slurm 22.05 writes them for each end (slurm_jobacct_gather,
        # SIG_OOM 253 shown as 0:125; apps/simulator/sacct.py keeps the same table)
        ("OUT_OF_MEMORY", "0:125", "ran out of memory (killed)"),
        ("TIMEOUT", "0:0", "killed at its time limit"),
        ("NODE_FAIL", "0:0", "ended by the failure of its node"),
        ("PREEMPTED", "0:0", "preempted (stopped for a job of higher priority)"),
    ],
)
def test_slurm_s_exit_codes_of_each_end_read_as_what_happened(state: str, exit_code_column: str, text: str) -> None:
    codes = sacct_parsable_exit_codes(f"JobIDRaw|State|ExitCode\n41|{state}|{exit_code_column}\n")
    exit_code, signal = codes["41"]
    assert exit_text(state.lower(), exit_code, signal) == text
