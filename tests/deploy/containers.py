"""Podman as the container tests run it: the settings and the image store of scripts/containers.sh
(scripts/podman/*.conf), the base image it builds once from Debian's archive, and the app's and the agent's
images built from the repository's Dockerfiles."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "containers.sh"


def podman_env() -> dict[str, str]:
    """The environment scripts/containers.sh gives podman: its settings, its store."""
    return {
        **os.environ,
        "CONTAINERS_CONF": str(REPO / "scripts" / "podman" / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(REPO / "scripts" / "podman" / "storage.conf"),
    }


def podman(*args: str, timeout_s: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


def script(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout_s, check=False, cwd=REPO
    )
    if proc.returncode != 0:
        raise AssertionError(f"scripts/containers.sh {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


# Planted in the build context beside the checkout's files: .dockerignore must keep each out of the image.
CANARY = f"fleetwatt-canary-{uuid.uuid4().hex}"
CANARY_FILES = {
    ".env": f"DJANGO_SECRET_KEY={CANARY}\n",
    ".env.production": f"DATABASE_URL=postgres://owner:{CANARY}@db/fleetwatt\n",
    "deploy/tls.key": (
        f"-----BEGIN PRIVATE KEY-----\n{base64.b64encode(CANARY.encode()).decode()}\n-----END PRIVATE KEY-----\n"
    ),
    "deploy/k8s/client.pem": f"-----BEGIN CERTIFICATE-----\n{CANARY}\n-----END CERTIFICATE-----\n",
}


def build_context_copy(folder: Path) -> Path:
    """The checkout as git sees it (tracked files and untracked ones it does not ignore, so that
    uncommitted work is built too), plus the canaries: a developer's checkout holds such files."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, folder / rel)
    for rel, text in CANARY_FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    build_s: float
    size_bytes: int


def app_image_build(context: Path) -> Iterator[BuiltImage]:
    """The app's image under a tag of this run's own, removed afterwards whatever happened. The base image
    stays in the store: the next run does not debootstrap again."""
    yield from image_build("build", "localhost/fleetwatt-test", context)


def agent_image_build(context: Path) -> Iterator[BuiltImage]:
    """The agent's image (agent/deploy/Dockerfile of the checkout copied to `context`, over the same base)
    under a tag of this run's own, removed afterwards whatever happened."""
    yield from image_build("build-agent", "localhost/fleetwatt-agent-test", context)


def image_build(command: str, repository: str, context: Path) -> Iterator[BuiltImage]:
    tag = f"{repository}:{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    try:
        script(command, tag, str(context), timeout_s=900)
        build_s = time.monotonic() - started
        size = int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
        yield BuiltImage(tag=tag, build_s=build_s, size_bytes=size)
    finally:
        podman("rmi", "--force", tag, check=False)


def container_remove(name: str) -> None:
    podman("rm", "--force", "--time", "5", name, check=False)


def image_filesystem(tag: str) -> Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]:
    """Every entry of the image's filesystem, as `podman export` of a container made from it (never
    started) streams it; regular files come with a reader."""
    name = f"fleetwatt-test-export-{uuid.uuid4().hex[:12]}"
    podman("create", "--name", name, tag, "true")
    try:
        proc = subprocess.Popen(["podman", "export", name], env=podman_env(), stdout=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    yield member, tar.extractfile(member) if member.isfile() else None
        finally:
            proc.stdout.close()
            proc.wait(timeout=60)
    finally:
        container_remove(name)
