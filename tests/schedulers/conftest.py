"""A real one-node Slurm with accounting (munged, slurmdbd on MariaDB, slurmctld, slurmd with 4 stand-in GPUs),
started once per session by scripts/slurm.sh. docs/schedulers.md describes it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm.sh"
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


def record_final(job: dict[str, Any]) -> bool:
    """A job's accounting record in its final form. A step's record can reach slurmdbd before its job's: the
    database then holds a stand-in named "allocation", with no partition, no TRES and no allocated nodes, which
    can already read COMPLETED or FAILED with an end time before slurmctld's own record of the job fills it in."""
    return bool(job["state"]["current"] in FINAL_STATES and job["time"]["end"] and job["partition"])


def env_parse(text: str) -> dict[str, str]:
    """The `export NAME=value` lines that `slurm.sh env` prints."""
    found = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, value = words[1].split("=", 1)
            found[name] = value
    return found


@dataclass(frozen=True)
class LocalSlurm:
    env: dict[str, str]

    @property
    def jobs_dir(self) -> Path:
        return Path(self.env["FLEETWATT_SLURM_JOBS"])

    def run(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        assert done.returncode == 0, f"{shlex.join(args)} exited {done.returncode}: {done.stderr}"
        return done.stdout

    def sbatch(self, *args: str) -> int:
        """Submit a batch job; its output goes to the jobs folder as <raw id>.out."""
        out = self.run("sbatch", "--parsable", "-o", f"{self.jobs_dir}/%j.out", *args)
        return int(out.strip().split(";")[0])

    def sacct_json(self, *job_ids: int) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.run("sacct", "--json", "-a", "-j", ",".join(map(str, job_ids))))
        return document

    def wait_final(self, *job_ids: int, timeout: float = 60) -> dict[str, Any]:
        """Poll sacct until every job's record is whole and final (docs/schedulers.md, "allocation")."""
        deadline = time.monotonic() + timeout
        while True:
            document = self.sacct_json(*job_ids)
            jobs = {job["job_id"]: job for job in document["jobs"]}
            if all(job_id in jobs and record_final(jobs[job_id]) for job_id in job_ids):
                return document
            if time.monotonic() > deadline:
                states = {job_id: jobs.get(job_id, {}).get("state") for job_id in job_ids}
                pytest.fail(f"jobs not finished in sacct after {timeout}s: {states}")
            time.sleep(0.5)


def script(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT
    )


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[LocalSlurm]:
    """The local Slurm, started through the script (installing its packages if missing) and stopped at the end
    of the session when this session started it."""
    if os.geteuid() != 0:
        pytest.skip("the local Slurm needs root (apt-get, the munge user, SlurmUser=root)")
    was_running = script("status").returncode == 0
    started = script("start")
    assert started.returncode == 0, f"scripts/slurm.sh start failed:\n{started.stdout}\n{started.stderr}"
    env = {**os.environ, **env_parse(script("env").stdout)}
    try:
        yield LocalSlurm(env)
    finally:
        if not was_running:
            script("stop", timeout=120)
