"""Job discovery on fake /proc trees: Slurm, Kubernetes, Docker/containerd, plain processes;
cgroup v1 and v2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fleetwatt_agent.discovery import ProcResolver, parse_cgroup, parse_stat

BTIME = 1_800_000_000
HZ = os.sysconf("SC_CLK_TCK")
UID = "3f1c2b3a-1111-2222-3333-444455556666"
CID = "0123456789abcdef" * 4


def make_proc(
    root: Path,
    pid: int,
    *,
    ppid: int = 1,
    start: int = 1000,
    cgroup: str = "0::/",
    env: dict[str, str] | None = None,
    uid: int = 1000,
    comm: str = "python",
) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    fields = ["S", str(ppid)] + ["0"] * 17 + [str(start)] + ["0"] * 30
    (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
    (d / "cgroup").write_text(cgroup + "\n")
    (d / "status").write_text(f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    if env is not None:
        (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    (tmp_path / "stat").write_text(f"cpu  1 2 3\nbtime {BTIME}\n")
    return tmp_path


def resolver(root: Path, pods: object = None) -> ProcResolver:
    return ProcResolver(root, pods=pods, user_name=lambda uid: {1000: "ada", 1001: "bob"}.get(uid, str(uid)))  # type: ignore[arg-type]


def test_slurm_cgroup_v2_with_metadata_and_oldest_process_start(proc: Path) -> None:
    # given slurmstepd (older) and the user's python under job_1234 (cgroup v2 plugin)
    base = "0::/system.slice/slurmstepd.scope/job_1234"
    make_proc(proc, 50, ppid=1, start=100, cgroup=base + "/step_0/slurm", comm="slurmstepd")
    make_proc(
        proc,
        60,
        ppid=50,
        start=200,
        cgroup=base + "/step_0/user/task_0",
        env={
            "SLURM_JOB_ID": "1234",
            "SLURM_JOB_ACCOUNT": "physics",
            "SLURM_JOB_NAME": "train",
            "SLURM_JOB_USER": "ada",
        },
    )
    # when
    info = resolver(proc).resolve(60)
    # then
    assert info.job_key == "slurm/1234"
    assert (info.scheduler, info.job_id, info.user, info.account, info.name) == (
        "slurm",
        "1234",
        "ada",
        "physics",
        "train",
    )
    assert info.start_time == pytest.approx(BTIME + 100 / HZ)
    assert not info.scheduler_start


def test_slurm_cgroup_v1_without_environment(proc: Path) -> None:
    make_proc(
        proc,
        70,
        start=300,
        uid=1001,
        cgroup="\n".join(
            [
                "12:memory:/slurm/uid_1001/job_77/step_batch/task_0",
                "4:freezer:/slurm/uid_1001/job_77/step_batch",
                "1:name=systemd:/system.slice/slurmd.service",
            ]
        ),
    )
    info = resolver(proc).resolve(70)
    assert (info.job_key, info.user) == ("slurm/77", "bob")


def test_slurm_from_the_environment_and_scheduler_start(proc: Path) -> None:
    make_proc(
        proc,
        80,
        cgroup="0::/user.slice/user-1000.slice/session-4.scope",
        env={"SLURM_JOB_ID": "991", "SLURM_JOB_START_TIME": "1800000123"},
    )
    info = resolver(proc).resolve(80)
    assert info.job_key == "slurm/991"
    assert info.start_time == 1_800_000_123.0 and info.scheduler_start


class Pods:
    def __init__(self, answer: tuple[str, str] | None) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str]] = []

    def lookup(self, uid: str, name_hint: str) -> tuple[str, str] | None:
        self.calls.append((uid, name_hint))
        return self.answer


def test_kubernetes_cgroup_v1_cgroupfs_named_by_the_kubelet(proc: Path) -> None:
    make_proc(
        proc,
        90,
        cgroup=f"11:memory:/kubepods/burstable/pod{UID}/{CID}\n10:cpu:/kubepods/burstable/pod{UID}/{CID}",
        env={"HOSTNAME": "trainer-0"},
    )
    pods = Pods(("ml", "trainer-0"))
    info = resolver(proc, pods).resolve(90)
    assert info.job_key == "k8s/ml/trainer-0"
    assert (info.scheduler, info.namespace, info.pod, info.job_id) == ("kubernetes", "ml", "trainer-0", UID)
    assert pods.calls == [(UID, "trainer-0")]


def test_kubernetes_cgroup_v2_systemd_falls_back_to_the_pod_uid(proc: Path) -> None:
    uid_ = UID.replace("-", "_")
    make_proc(
        proc,
        91,
        cgroup=f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/"
        f"cri-containerd-{CID}.scope",
    )
    info = resolver(proc, Pods(None)).resolve(91)
    assert info.job_key == f"k8s/pod-uid/{UID}"
    assert resolver(proc).resolve(91).job_key == f"k8s/pod-uid/{UID}"


def test_a_pods_key_is_fixed_for_the_agents_life(proc: Path) -> None:
    make_proc(proc, 92, cgroup=f"0::/kubepods/besteffort/pod{UID}/{CID}")
    make_proc(proc, 93, cgroup=f"0::/kubepods/besteffort/pod{UID}/{CID}")
    pods = Pods(("ml", "p"))
    r = resolver(proc, pods)
    assert r.resolve(92).job_key == "k8s/ml/p"
    pods.answer = None  # the kubelet stops answering
    assert r.resolve(93).job_key == "k8s/ml/p"
    assert len(pods.calls) == 1


@pytest.mark.parametrize(
    "cgroup",
    [
        f"12:cpu,cpuacct:/docker/{CID}\n11:memory:/docker/{CID}",  # Docker, cgroup v1
        f"0::/system.slice/docker-{CID}.scope",  # Docker, cgroup v2 (systemd driver)
        f"0::/system.slice/containerd.service/default/{CID}",  # containerd (nerdctl), cgroupfs
        f"0::/machine.slice/libpod-{CID}.scope/container",  # Podman
    ],
)
def test_containers(proc: Path, cgroup: str) -> None:
    make_proc(proc, 100, start=500, cgroup=cgroup)
    info = resolver(proc).resolve(100)
    assert info.job_key == f"container/{CID[:12]}"
    assert info.scheduler == "container"


def test_container_start_is_its_oldest_process(proc: Path) -> None:
    make_proc(proc, 110, ppid=1, start=40, cgroup="0::/init.scope", comm="containerd-shim")
    make_proc(proc, 111, ppid=110, start=50, cgroup=f"0::/system.slice/docker-{CID}.scope", comm="bash")
    make_proc(proc, 112, ppid=111, start=70, cgroup=f"0::/system.slice/docker-{CID}.scope")
    assert resolver(proc).resolve(112).start_time == pytest.approx(BTIME + 50 / HZ)


def test_plain_process_key_has_its_start_time(proc: Path) -> None:
    make_proc(proc, 4242, start=123456, cgroup="0::/user.slice/user-1000.slice/session-2.scope", comm="my (odd) prog")
    info = resolver(proc).resolve(4242)
    assert info.job_key == "proc/4242-123456"
    assert (info.scheduler, info.user, info.name) == ("process", "ada", "my (odd) prog")
    assert info.start_time == pytest.approx(BTIME + 123456 / HZ)


def test_a_pid_missing_from_proc_still_gets_a_key(proc: Path) -> None:
    assert resolver(proc).resolve(999).job_key == "proc/999-0"


def test_parse_helpers() -> None:
    assert parse_stat("7 (a b) c)) S 3 " + "0 " * 17 + "99 0") == (3, 99, "a b) c)")
    assert parse_cgroup("garbage") == parse_cgroup("")
    assert parse_cgroup("0::/kubepods/podnot-a-uid/x").pod_uid == ""
