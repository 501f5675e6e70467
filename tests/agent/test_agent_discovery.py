"""Job discovery on fake /proc trees: Slurm, Kubernetes, Docker/containerd, plain processes;
cgroup v1 and v2, and Slurm 26.05's SLUID-named cgroup v2 job directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fleetwatt_agent.discovery import CgroupIdentity, ProcResolver, parse_cgroup, parse_stat

BTIME = 1_800_000_000
HZ = os.sysconf("SC_CLK_TCK")
UID = "3f1c2b3a-1111-2222-3333-444455556666"
CID = "0123456789abcdef" * 4
SLUID = "sEKNKTV3WPV500"  # the example of cgroup.conf(5), CgroupJobIdPaths


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


# -- Slurm job layouts ------------------------------------------------------------------------------
# Where a Slurm job's processes sit, by layout: (slurmstepd's cgroup, the task's cgroup) for job 4321.
SLURM_LAYOUTS = {
    # cgroup v1 plugin: one line per controller
    "v1": (
        "4:freezer:/slurm/uid_1000/job_4321/step_0\n12:memory:/slurm/uid_1000/job_4321/step_0",
        "4:freezer:/slurm/uid_1000/job_4321/step_0/task_0\n12:memory:/slurm/uid_1000/job_4321/step_0/task_0",
    ),
    # cgroup v2 plugin before Slurm 26.05, or 26.05 with CgroupJobIdPaths=yes
    "v2-job-id": (
        "0::/system.slice/slurmstepd.scope/job_4321/step_0/slurm",
        "0::/system.slice/slurmstepd.scope/job_4321/step_0/user/task_0",
    ),
    # cgroup v2 plugin, Slurm 26.05 default: the job directory is the job's SLUID
    "v2-sluid": (
        f"0::/system.slice/slurmstepd.scope/{SLUID}/step_0/slurm",
        f"0::/system.slice/slurmstepd.scope/{SLUID}/step_0/user/task_0",
    ),
    # the same on a build with multiple slurmd per host (the scope carries the node name)
    "v2-sluid-multiple-slurmd": (
        f"0::/system.slice/gpu01_slurmstepd.scope/{SLUID}/step_0/slurm",
        f"0::/system.slice/gpu01_slurmstepd.scope/{SLUID}/step_0/user/task_0",
    ),
}
JOB_ENV = {
    "SLURM_JOB_ID": "4321",
    "SLURM_JOB_SLUID": SLUID,
    "SLURM_JOB_USER": "ada",
    "SLURM_JOB_ACCOUNT": "physics",
    "SLURM_JOB_NAME": "train",
}


def slurm_job(proc: Path, layout: str, env: dict[str, str] | None = JOB_ENV) -> int:
    """A Slurm job on a fake /proc: slurmd (outside the job), its slurmstepd, and the user's GPU
    process with `env` as its environment (None: unreadable). Returns the GPU process's PID."""
    stepd_cgroup, task_cgroup = SLURM_LAYOUTS[layout]
    make_proc(proc, 40, ppid=1, start=10, cgroup="0::/system.slice/slurmd.service", uid=0, comm="slurmd")
    make_proc(proc, 50, ppid=40, start=100, cgroup=stepd_cgroup, uid=0, comm="slurmstepd")
    make_proc(proc, 60, ppid=50, start=200, cgroup=task_cgroup, env=env)
    return 60


@pytest.fixture(params=sorted(SLURM_LAYOUTS))
def slurm_layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_slurm_layout_gives_the_same_job(proc: Path, slurm_layout: str) -> None:
    # given job 4321 laid out by the v1 plugin, the v2 plugin with job_<id>, or the v2 plugin with its SLUID
    pid = slurm_job(proc, slurm_layout)
    # when
    info = resolver(proc).resolve(pid)
    # then one key whatever the layout (so CgroupJobIdPaths does not change it), and the job's start is
    # slurmstepd's: the walk up stays in the job's cgroup and stops before slurmd
    assert info.job_key == "slurm/4321"
    assert (info.scheduler, info.job_id, info.user, info.account, info.name) == (
        "slurm",
        "4321",
        "ada",
        "physics",
        "train",
    )
    assert info.start_time == pytest.approx(BTIME + 100 / HZ)


@pytest.mark.parametrize("layout", ["v1", "v2-job-id"])
def test_a_job_id_directory_needs_no_environment(proc: Path, layout: str) -> None:
    assert resolver(proc).resolve(slurm_job(proc, layout, env=None)).job_key == "slurm/4321"


@pytest.mark.parametrize("layout", ["v2-sluid", "v2-sluid-multiple-slurmd"])
def test_sluid_job_with_unreadable_environment_is_keyed_by_its_sluid(proc: Path, layout: str) -> None:
    # given a 26.05 job whose GPU process's environ cannot be read (no CAP_SYS_PTRACE)
    pid = slurm_job(proc, layout, env=None)
    # when
    info = resolver(proc).resolve(pid)
    # then it is still a Slurm job, under its SLUID; no job id is made up
    assert info.job_key == f"slurm/sluid-{SLUID}"
    assert (info.scheduler, info.job_id, info.user, info.account) == ("slurm", "", "ada", "")
    assert info.start_time == pytest.approx(BTIME + 100 / HZ)


def test_sluid_job_ignores_an_environment_of_another_job(proc: Path) -> None:
    # given a process in job SLUID's cgroup whose environment names another job (inherited or set by hand)
    pid = slurm_job(proc, "v2-sluid", env={**JOB_ENV, "SLURM_JOB_ID": "777", "SLURM_JOB_SLUID": "s0000000000000"})
    # when
    info = resolver(proc).resolve(pid)
    # then neither its job id nor its metadata are taken
    assert (info.job_key, info.job_id, info.account, info.name) == (f"slurm/sluid-{SLUID}", "", "", "")


def test_sluid_job_without_sluid_in_the_environment_uses_slurm_job_id(proc: Path) -> None:
    env = {k: v for k, v in JOB_ENV.items() if k != "SLURM_JOB_SLUID"}
    assert resolver(proc).resolve(slurm_job(proc, "v2-sluid", env=env)).job_key == "slurm/4321"


def test_sluid_array_task_is_keyed_by_its_raw_job_id(proc: Path) -> None:
    # given task 3 of array job 4318, whose own (raw) job id is 4321
    env = {**JOB_ENV, "SLURM_ARRAY_JOB_ID": "4318", "SLURM_ARRAY_TASK_ID": "3"}
    assert resolver(proc).resolve(slurm_job(proc, "v2-sluid", env=env)).job_key == "slurm/4321"
    # and without SLURM_JOB_ID the array ids do not stand in for it (the raw id cannot be derived)
    make_proc(
        proc,
        61,
        ppid=50,
        start=210,
        cgroup=SLURM_LAYOUTS["v2-sluid"][1],
        env={"SLURM_ARRAY_JOB_ID": "4318", "SLURM_ARRAY_TASK_ID": "3"},
    )
    assert resolver(proc).resolve(61).job_key == f"slurm/sluid-{SLUID}"


def test_slurmstepd_system_directory_is_not_a_job(proc: Path) -> None:
    make_proc(proc, 70, start=300, cgroup="0::/system.slice/slurmstepd.scope/system", uid=0, comm="slurmstepd")
    assert resolver(proc).resolve(70).job_key == "proc/70-300"


def test_only_the_directory_under_slurmstepds_scope_names_the_job() -> None:
    scope = "0::/system.slice/slurmstepd.scope"
    assert parse_cgroup(f"{scope}/{SLUID}/step_0/user/task_0") == CgroupIdentity(slurm_sluid=SLUID)
    assert parse_cgroup(f"{scope}/job_4321/step_batch/slurm") == CgroupIdentity(slurm_job="4321")
    # a `job_<n>` deeper down (a sub-cgroup the job made) does not override the SLUID
    assert parse_cgroup(f"{scope}/{SLUID}/step_0/user/task_0/job_99") == CgroupIdentity(slurm_sluid=SLUID)
    # a scope moved by CgroupSlice
    assert parse_cgroup(f"0::/gpu.slice/slurmstepd.scope/{SLUID}/step_0/slurm").slurm_sluid == SLUID
    assert parse_cgroup(f"{scope}/system") == CgroupIdentity()


def test_sluid_jobs_start_walk_stops_at_another_sluid(proc: Path) -> None:
    # given a GPU process whose parent sits in another job's SLUID directory (not a real tree, but the
    # walk must not cross it)
    make_proc(proc, 80, ppid=1, start=50, cgroup="0::/system.slice/slurmstepd.scope/sAAAAAAAAAAAA0/step_0/slurm")
    make_proc(proc, 81, ppid=80, start=90, cgroup=SLURM_LAYOUTS["v2-sluid"][1])
    assert resolver(proc).resolve(81).start_time == pytest.approx(BTIME + 90 / HZ)


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
