"""Where scripts/slurm.sh puts what munged must reach. munged runs as the munge user, which may not enter the
checkout (a clone in /root, or in a mode-700 folder): its key, seed, log and socket live in a folder of their own
outside it, and where that folder is closed to munge too, start says so in one line before starting anything."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT, SCRIPT, LocalSlurm

pytestmark = pytest.mark.slurm


def test_munge_lives_outside_the_checkout_closed_to_others(local_slurm: LocalSlurm) -> None:
    # given the running local Slurm's munge socket
    socket = Path(local_slurm.env["FLEETWATT_SLURM_MUNGE_SOCKET"])
    # then it is outside the checkout (restart a Slurm started by an earlier slurm.sh: stop, then start)
    assert not socket.is_relative_to(ROOT), f"munge socket {socket} is in the checkout"
    # and the key is munge's alone, in a folder only munge may enter, as a system munged's
    secrets = socket.parent.parent / "munge"
    key = secrets / "munge.key"
    assert key.exists(), f"no key beside the socket's folder: {sorted(secrets.parent.iterdir())}"
    munge = pwd.getpwnam("munge").pw_uid
    for path, mode in ((secrets, 0o700), (key, 0o400)):
        info = path.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (munge, mode), path


def test_start_says_why_munge_cannot_reach_its_folder(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the local Slurm needs root (apt-get, the munge user, SlurmUser=root)")
    # given a checkout of the script, and a folder for munge's files that the munge user cannot enter
    checkout = tmp_path / "fw"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "scripts" / "slurm.sh")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    env = {**os.environ, "FLEETWATT_SLURM_RUN_DIR": str(closed / "run"), "FLEETWATT_SLURM_TIMEOUT": "5"}
    env.pop("SLURM_CONF", None)
    # when it is started
    done = subprocess.run(["bash", "scripts/slurm.sh", "start"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    try:
        # then it stops, its last line naming the folder and the setting, before the database or any daemon
        assert done.returncode == 1, done.stderr
        why = done.stderr.strip().splitlines()[-1]
        assert why.startswith(f"slurm.sh: the munge user cannot reach {closed / 'run'}/"), done.stderr
        assert "is closed to it" in why and "FLEETWATT_SLURM_RUN_DIR" in why, why
        assert "accounting database" not in done.stderr
        assert not list((checkout / "var" / "slurm" / "run").glob("*.pid"))
    finally:
        # and stop removes munge's folder, key and all
        stopped = subprocess.run(["bash", "scripts/slurm.sh", "stop"], cwd=checkout, env=env, capture_output=True,
                                 text=True, timeout=120, check=False)  # fmt: skip
    assert stopped.returncode == 0, stopped.stderr
    assert list((closed / "run").iterdir()) == []
