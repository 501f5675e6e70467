"""The GPU-time injection library (agent/gputime) built as a GPU node builds it, against the CUDA and CUPTI
headers and libcupti of NVIDIA's wheels (scripts/bootstrap.sh puts them in var/cuda-headers), and loaded
where there is no GPU: the process it is injected into must run on untouched."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEADERS = REPO / "var" / "cuda-headers" / "nvidia"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert HEADERS.is_dir(), (
        "make test installs CUDA's headers into var/cuda-headers (WANT_CUDA_HEADERS=1 scripts/bootstrap.sh)"
    )
    out = tmp_path_factory.mktemp("gputime")
    env = {**os.environ, "CUDA_HOME": str(HEADERS)}
    proc = subprocess.run(
        ["bash", str(REPO / "agent" / "gputime" / "build.sh"), str(out)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    return out / "libfleetwatt_gputime.so"


def test_it_exports_only_the_injection_entry_point(library: Path) -> None:
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in symbols.stdout.splitlines() if " T " in line}
    assert exported == {"InitializeInjection"}
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    assert "libcupti" in needed and "libcuda.so" not in needed  # the driver is found at run time


def _inject(library: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import ctypes, sys\n"
        f"rc = ctypes.CDLL({str(library)!r}).InitializeInjection()\n"
        "print('initialised', rc)\n"
        "print('the program runs on')\n"
    )
    env = {**os.environ, "FLEETWATT_GPUTIME_DIR": str(folder)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_without_a_gpu_the_process_runs_on_and_says_why_in_one_line(library: Path, tmp_path: Path) -> None:
    folder = tmp_path / "gputime"
    proc = _inject(library, folder)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["initialised 1", "the program runs on"]  # 1: the driver goes on
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetwatt-gputime: GPU time not measured: "), proc.stderr
    assert list(folder.iterdir()) == []  # nothing measured, nothing written
    # the folder it made is every user's, sticky: a job can write its own file and no other's
    assert stat.S_IMODE(folder.stat().st_mode) == 0o1777


def test_a_folder_it_cannot_create_is_said_not_fatal(library: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = _inject(library, blocker / "gputime")
    assert proc.returncode == 0 and "the program runs on" in proc.stdout
    assert "cannot create" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
