"""Which job a GPU process belongs to, from /proc (cgroup v1 and v2, environment, stat).

job_key formats (DESIGN.md section 2), first match wins:
- `slurm/<jobid>`: `job_<id>` in the cgroup path (cgroup v1 `/slurm/uid_<uid>/job_<id>/...`; cgroup v2
  `.../[<node>_]slurmstepd.scope/job_<id>/...`, Slurm before 26.05 or with `CgroupJobIdPaths=yes`);
  for a cgroup v2 job directory named by the job's SLUID (`.../slurmstepd.scope/<SLUID>/...`, the
  Slurm 26.05 default), SLURM_JOB_ID from the process environment, used only when the environment's
  SLURM_JOB_SLUID (where set) names the same SLUID; else SLURM_JOB_ID in the environment of a process
  outside any Slurm cgroup (Slurm without its cgroup plugin). A job id is never derived from a SLUID;
- `slurm/sluid-<SLUID>`: a process in a SLUID-named job directory whose environment does not give its
  job id (unreadable, or without a matching SLURM_JOB_ID);
- `k8s/<namespace>/<pod>`: `pod<uid>` under kubepods (cgroupfs or systemd driver); namespace and name
  from the kubelet (see kubelet.py), else `k8s/pod-uid/<uid>`;
- `container/<id12>`: Docker, containerd, CRI-O, Podman (a 64-hex container id in the cgroup path);
- `proc/<pid>-<starttime>`: anything else; starttime is field 22 of /proc/<pid>/stat (clock ticks since
  boot), so a reused PID is a new job.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fleetwatt_agent.model import JobInfo

log = logging.getLogger(__name__)

_SLURM_JOB = re.compile(r"/job_(\d+)(?=/|$|\.)")
# cgroup v2: slurmstepd's scope (`<node>_slurmstepd.scope` with multiple slurmd; under the slice that
# CgroupSlice names) and the component right under it: `job_<id>`, the job's SLUID (Slurm 26.05 default,
# e.g. `sEKNKTV3WPV500`), or `system` (slurmstepd's own infinity process, not a job).
_STEPD_SCOPE = re.compile(r"/(?:[^/]+_)?slurmstepd\.scope/([^/]+)")
_SCOPE_JOB_ID = re.compile(r"job_(\d+)")
_SCOPE_NOT_A_JOB = frozenset({"system"})
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?=\.slice|/|$)")
_CONTAINER = re.compile(
    r"(?:^|[/-])(?:(docker|cri-containerd|containerd|crio|libpod|nerdctl)[-/:])?([0-9a-f]{64})(?:\.scope)?(?=/|$)"
)
_ENV_KEYS = (
    "SLURM_JOB_ID",
    "SLURM_JOB_SLUID",
    "SLURM_JOB_USER",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_NAME",
    "SLURM_JOB_START_TIME",
    "HOSTNAME",
)
_MAX_ANCESTORS = 32


@dataclass(frozen=True)
class CgroupIdentity:
    """What a process's cgroup paths say about it."""

    slurm_job: str = ""  # the numeric id from a `job_<id>` directory
    slurm_sluid: str = ""  # a v2 job directory not named `job_<id>`: the job's SLUID, verbatim
    pod_uid: str = ""
    container_id: str = ""
    runtime: str = ""


def parse_cgroup(text: str) -> CgroupIdentity:
    """Parse /proc/<pid>/cgroup (v1: one line per hierarchy; v2: `0::/path`; hybrid: both)."""
    slurm = sluid = pod = container = runtime = ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2]
        if not (slurm or sluid):
            if scope := _STEPD_SCOPE.search(path):
                # Under slurmstepd's scope only the job directory counts, never a `job_<n>` deeper down.
                name = scope.group(1)
                if m := _SCOPE_JOB_ID.fullmatch(name):
                    slurm = m.group(1)
                elif name not in _SCOPE_NOT_A_JOB:
                    sluid = name
            elif m := _SLURM_JOB.search(path):
                slurm = m.group(1)
        if "kubepods" in path and not pod and (m := _POD_UID.search(path)):
            pod = m.group(1).replace("_", "-")
        if not container:
            for m in _CONTAINER.finditer(path):
                container, runtime = m.group(2), m.group(1) or ""
    return CgroupIdentity(slurm, sluid, pod, container, runtime)


def parse_stat(text: str) -> tuple[int, int, str]:
    """(ppid, starttime in clock ticks since boot, comm) from /proc/<pid>/stat.

    comm may hold spaces and parentheses, so split after the last ')'."""
    lpar, rpar = text.index("("), text.rindex(")")
    rest = text[rpar + 2 :].split()
    return int(rest[1]), int(rest[19]), text[lpar + 1 : rpar]


def parse_environ(raw: bytes, keys: tuple[str, ...] = _ENV_KEYS) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name.decode(errors="replace") in keys:
            env[name.decode()] = value.decode(errors="replace")
    return env


class PodNames(Protocol):
    def lookup(self, uid: str, name_hint: str) -> tuple[str, str] | None:
        """(namespace, pod name) for a pod UID, or None when the kubelet cannot say."""
        ...


class ProcResolver:
    """Resolves driver-listed PIDs from a /proc tree (the host's, or one a test built)."""

    def __init__(
        self,
        proc_root: str | os.PathLike[str] = "/proc",
        pods: PodNames | None = None,
        user_name: Callable[[int], str] | None = None,
    ) -> None:
        self.proc = Path(proc_root)
        self.pods = pods
        self._user_name = user_name or _passwd_name
        self._btime: float | None = None
        self._tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._pod_keys: dict[str, tuple[str, str, str]] = {}  # uid -> (job_key, namespace, name)

    # -- small readers (each returns None where the process is gone or unreadable) --------------------
    def _read(self, pid: int, name: str) -> str | None:
        try:
            return (self.proc / str(pid) / name).read_text(errors="replace")
        except OSError:
            return None

    def _stat(self, pid: int) -> tuple[int, int, str] | None:
        text = self._read(pid, "stat")
        if text is None:
            return None
        try:
            return parse_stat(text)
        except (ValueError, IndexError):
            return None

    def _environ(self, pid: int) -> dict[str, str]:
        try:
            return parse_environ((self.proc / str(pid) / "environ").read_bytes())
        except OSError:  # another user's process without CAP_SYS_PTRACE: cgroups still work
            return {}

    def _uid(self, pid: int) -> int | None:
        text = self._read(pid, "status")
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
        return None

    def btime(self) -> float:
        if self._btime is None:
            self._btime = 0.0
            text = (self.proc / "stat").read_text() if (self.proc / "stat").exists() else ""
            for line in text.splitlines():
                if line.startswith("btime "):
                    self._btime = float(line.split()[1])
        return self._btime

    def start_wall(self, starttime_ticks: int) -> float:
        return self.btime() + starttime_ticks / self._tick

    # -- resolution ----------------------------------------------------------------------------------
    def identity(self, pid: int) -> tuple[CgroupIdentity, dict[str, str]]:
        cg = parse_cgroup(self._read(pid, "cgroup") or "")
        return cg, self._environ(pid)

    def resolve(self, pid: int) -> JobInfo:
        stat = self._stat(pid)
        if stat is None:
            # Not in our /proc: gone already, or another PID namespace (run the agent with hostPID).
            log.debug("pid %d is listed by the driver but not in %s", pid, self.proc)
            return JobInfo(job_key=f"proc/{pid}-0", scheduler="process")
        _, starttime, comm = stat
        cg, env = self.identity(pid)
        uid = self._uid(pid)
        user = self._user_name(uid) if uid is not None else ""
        info = self._classify(pid, starttime, comm, cg, env, user)
        if not info.scheduler_start:
            info.start_time = self._oldest_start(pid, starttime, cg, env, info.job_key)
        return info

    def _classify(
        self, pid: int, starttime: int, comm: str, cg: CgroupIdentity, env: dict[str, str], user: str
    ) -> JobInfo:
        slurm = _slurm_job(cg, env)
        if slurm is not None:
            key, slurm_id, job_env = slurm
            start = _float(job_env.get("SLURM_JOB_START_TIME"))
            return JobInfo(
                job_key=key,
                scheduler="slurm",
                job_id=slurm_id,
                user=job_env.get("SLURM_JOB_USER") or user,
                account=job_env.get("SLURM_JOB_ACCOUNT", ""),
                name=job_env.get("SLURM_JOB_NAME", ""),
                start_time=start,
                scheduler_start=start is not None,
            )
        if cg.pod_uid:
            key, namespace, pod = self._pod_key(cg.pod_uid, env.get("HOSTNAME", ""))
            return JobInfo(
                job_key=key,
                scheduler="kubernetes",
                job_id=cg.pod_uid,
                user=user,
                namespace=namespace,
                pod=pod,
                name=pod,
            )
        if cg.container_id:
            return JobInfo(
                job_key=f"container/{cg.container_id[:12]}",
                scheduler="container",
                job_id=cg.container_id[:12],
                user=user,
                name=cg.runtime,
            )
        return JobInfo(
            job_key=f"proc/{pid}-{starttime}",
            scheduler="process",
            job_id=str(pid),
            user=user,
            name=comm,
        )

    def _pod_key(self, uid: str, name_hint: str) -> tuple[str, str, str]:
        """A pod's key is fixed the first time the agent meets it, so one pod is one job for the
        agent's life even if the kubelet stops answering later."""
        cached = self._pod_keys.get(uid)
        if cached is not None:
            return cached
        found = None
        if self.pods is not None:
            try:
                found = self.pods.lookup(uid, name_hint)
            except Exception as exc:  # the kubelet is optional: fall back to the UID
                log.warning("kubelet pod lookup failed: %s", exc)
        if found is not None:
            result = (f"k8s/{found[0]}/{found[1]}", found[0], found[1])
        else:
            result = (f"k8s/pod-uid/{uid}", "", "")
        self._pod_keys[uid] = result
        return result

    def _oldest_start(self, pid: int, starttime: int, cg: CgroupIdentity, env: dict[str, str], key: str) -> float:
        """Oldest start among the process and its ancestors in the same job (for a plain process, itself)."""
        oldest = starttime
        if key.startswith("proc/"):
            return self.start_wall(oldest)
        same = _same_job(cg, env)
        current = pid
        for _ in range(_MAX_ANCESTORS):
            stat = self._stat(current)
            if stat is None:
                break
            ppid = stat[0]
            if ppid <= 1:
                break
            parent = self._stat(ppid)
            if parent is None:
                break
            pcg, penv = self.identity(ppid)
            if not same(pcg, penv):
                break
            oldest = min(oldest, parent[1])
            current = ppid
        return self.start_wall(oldest)


def _slurm_job(cg: CgroupIdentity, env: dict[str, str]) -> tuple[str, str, dict[str, str]] | None:
    """(job_key, job_id, the environment to take the job's metadata from) for a Slurm job, else None.

    In a SLUID-named cgroup the job id comes only from the process's own SLURM_JOB_ID (for an array
    task that is the task's own raw id, as in its `job_<id>` directory with CgroupJobIdPaths=yes, so the
    key does not depend on that setting); an environment whose SLURM_JOB_SLUID names another job is not
    this job's. Without a usable SLURM_JOB_ID the key is the SLUID itself: a job id is not derived from it.
    """
    if cg.slurm_job:
        return f"slurm/{cg.slurm_job}", cg.slurm_job, env
    if cg.slurm_sluid:
        env_sluid = env.get("SLURM_JOB_SLUID", "")
        if env_sluid and env_sluid.casefold() != cg.slurm_sluid.casefold():
            log.debug("SLURM_JOB_SLUID %s is not the cgroup's SLUID %s: environment ignored", env_sluid, cg.slurm_sluid)
            env = {}
        job_id = env.get("SLURM_JOB_ID", "")
        if job_id:
            return f"slurm/{job_id}", job_id, env
        return f"slurm/sluid-{cg.slurm_sluid}", "", env
    job_id = env.get("SLURM_JOB_ID", "")
    if job_id:
        return f"slurm/{job_id}", job_id, env
    return None


def _same_job(cg: CgroupIdentity, env: dict[str, str]) -> Callable[[CgroupIdentity, dict[str, str]], bool]:
    if cg.slurm_job:
        return lambda c, e: c.slurm_job == cg.slurm_job
    if cg.slurm_sluid:
        return lambda c, e: c.slurm_sluid == cg.slurm_sluid
    if env.get("SLURM_JOB_ID"):
        return lambda c, e: (c.slurm_job or e.get("SLURM_JOB_ID", "")) == env["SLURM_JOB_ID"]
    if cg.pod_uid:
        return lambda c, e: c.pod_uid == cg.pod_uid
    if cg.container_id:
        return lambda c, e: c.container_id == cg.container_id
    return lambda c, e: False


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


_USER_CACHE: dict[int, str] = {}


def _passwd_name(uid: int) -> str:
    name = _USER_CACHE.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        _USER_CACHE[uid] = name
    return name
