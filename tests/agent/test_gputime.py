"""Exact GPU time (agent/fleetwatt_agent/gputime.py and the `gpu_time` split): the injection library's
files read for the right process only, its counters turned into each sample's busy time, and the split
by it, jobs + idle = the GPU on every sample."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from fleetwatt_agent.backends.replay import ReplayBackend, read_trace
from fleetwatt_agent.backends.replay import _process as replay_process
from fleetwatt_agent.errors import TraceFormatError
from fleetwatt_agent.gputime import GpuCounters, GpuTimeBackend, GpuTimeReader, SharedTime, parse_state, share_bin
from fleetwatt_agent.model import BackendInfo, GpuReading, JobInfo, ProcessReading
from fleetwatt_agent.recorder import _process as recorder_process
from fleetwatt_agent.sampler import Sampler, SamplerSettings
from fleetwatt_agent.server import jobs_document
from fleetwatt_agent.split import GpuTimePower, JobLoad, gpu_time_fractions, split_sample
from hypothesis import given
from hypothesis import strategies as st

from .testkit import ScriptedBackend, gpu_infos, make_sampler, run_all, tick, write_trace

UUID = "GPU-test-0"


# -- the files ----------------------------------------------------------------------------------------
def busy(reader: GpuTimeReader, pid: int) -> dict[str, int] | None:
    got = reader.counters(pid)
    return {uuid: c.busy_ns for uuid, c in got.items()} if got is not None else None


class FakeProc:
    """A /proc with the three things the reader needs of a process: its PID namespace, NSpid and start."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, pid: int, *, nspid: int | None = None, start: int = 5000, ns: str = "host") -> int:
        base = self.root / str(pid)
        (base / "ns").mkdir(parents=True, exist_ok=True)
        ns_file = self.root / f"ns-{ns}"
        ns_file.touch()
        if not (base / "ns" / "pid").exists():
            os.link(ns_file, base / "ns" / "pid")  # the same inode for processes of one namespace
        inner = f"\t{nspid}" if nspid is not None else ""
        (base / "status").write_text(f"Name:\tpython3\nNSpid:\t{pid}{inner}\n")
        fields = ["S", *["0"] * 18, str(start), "0"]  # fields 3.. 22 and one more
        (base / "stat").write_text(f"{pid} (py thon) (x) {' '.join(fields)}\n")
        return os.stat(ns_file).st_ino


def state(pid: int, pidns: int, busy: dict[str, int], *, start: int = 5000, final: bool = False) -> str:
    gpus = [{"device": i, "uuid": u, "busy_ns": b, "records": 1} for i, (u, b) in enumerate(busy.items())]
    doc = {
        "format": "fleetwatt-gputime",
        "version": 1,
        "pid": pid,
        "pidns": pidns,
        "start_ticks": start,
        "written_ns": 1,
        "final": final,
        "dropped_records": 0,
        "gpus": gpus,
    }
    return json.dumps(doc)


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "gputime"
    d.mkdir()
    return d


def test_a_process_reads_its_own_file(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(300)
    (folder / f"{ns}-300.json").write_text(state(300, ns, {UUID: 1_500}))
    reader = GpuTimeReader(folder, proc.root)
    assert busy(reader, 300) == {UUID: 1_500}
    assert busy(reader, 301) is None  # no such process


def test_a_process_in_a_container_is_found_by_its_namespace_and_inner_pid(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(4242, nspid=7, ns="pod-a")
    other = proc.add(4343, nspid=7, ns="pod-b")  # the same inner PID in another container
    (folder / f"{ns}-7.json").write_text(state(7, ns, {UUID: 10}))
    (folder / f"{other}-7.json").write_text(state(7, other, {UUID: 99}))
    reader = GpuTimeReader(folder, proc.root)
    assert busy(reader, 4242) == {UUID: 10}
    assert busy(reader, 4343) == {UUID: 99}


def test_a_reused_pid_never_reads_the_dead_process_file(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(300, start=9000)
    (folder / f"{ns}-300.json").write_text(state(300, ns, {UUID: 1_500}, start=5000))
    assert busy(GpuTimeReader(folder, proc.root), 300) is None


def test_another_users_file_is_not_trusted(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(300)
    path = folder / f"{ns}-300.json"
    path.write_text(state(300, ns, {UUID: 1_500}))
    os.chown(proc.root / "300", 1000, 1000)  # the process is user 1000's
    os.chown(path, 2000, 2000)  # the file user 2000's
    assert busy(GpuTimeReader(folder, proc.root), 300) is None
    os.chown(path, 1000, 1000)
    assert busy(GpuTimeReader(folder, proc.root), 300) == {UUID: 1_500}


def test_a_link_is_not_followed(proc: FakeProc, folder: Path, tmp_path: Path) -> None:
    ns = proc.add(300)
    target = tmp_path / "elsewhere.json"
    target.write_text(state(300, ns, {UUID: 1}))
    (folder / f"{ns}-300.json").symlink_to(target)
    assert busy(GpuTimeReader(folder, proc.root), 300) is None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"format": "other", "version": 1, "gpus": []}',
        b'{"format": "fleetwatt-gputime", "version": 2, "gpus": []}',
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": [{"uuid": "GPU-1", "busy_ns": -5}]}',
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": [{"uuid": "GPU-1", "busy_ns": 1.5}]}',
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": [{"uuid": "GPU-1", "busy_ns": true}]}',
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": "x"}',
        # short time per bin of another length than the bins; an estimate past the busy time
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": [{"uuid": "GPU-1", "busy_ns": 5, "bin_ns": 10,'
        b' "bins_from": 1, "bins_us": [1, 2], "bins_short_us": [1]}]}',
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": [{"uuid": "GPU-1", "busy_ns": 5, "estimated_ns": 6}]}',
        b'{"format": "fleetwatt-gputime", "version": 1, "gpus": [{"uuid": "GPU-1", "busy_ns": 5, "estimated_ns": -1}]}',
    ],
)
def test_a_file_that_is_not_a_valid_state_reads_as_none(raw: bytes) -> None:
    assert parse_state(raw) is None


def test_a_windowed_state_says_its_short_time_and_its_estimate() -> None:
    raw = (
        b'{"format": "fleetwatt-gputime", "version": 1, "windowed": true, "written_ns": 9, "gpus": [{"uuid": "GPU-1",'
        b' "busy_ns": 50, "estimated_ns": 30, "bin_ns": 10, "bins_from": 1, "bins_us": [4, 2],'
        b' "bins_short_us": [4, 0]}]}'
    )
    got = parse_state(raw)
    assert got is not None
    assert got["GPU-1"].bins_short_us == (4, 0) and got["GPU-1"].estimated_ns == 30


def test_stale_and_final_files_are_swept(proc: FakeProc, folder: Path) -> None:
    old, final, live = folder / "1-1.json", folder / "1-2.json", folder / "1-3.json"
    old.write_text(state(1, 1, {}))
    final.write_text(state(2, 1, {}, final=True))
    live.write_text(state(3, 1, {}, final=True))
    os.utime(old, (1, 1))
    ten_minutes_ago = os.stat(final).st_mtime - 700
    os.utime(final, (ten_minutes_ago, ten_minutes_ago))
    GpuTimeReader(folder, proc.root).forget(set())
    assert sorted(p.name for p in folder.iterdir()) == ["1-3.json"]


def test_the_backend_hands_each_process_its_counter_on_that_gpu(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(300)
    proc.add(301)
    proc.add(302)
    (folder / f"{ns}-300.json").write_text(state(300, ns, {UUID: 1_500, "GPU-test-1": 9}))
    (folder / f"{ns}-301.json").write_text(state(301, ns, {"GPU-test-1": 3}))  # ran nothing on GPU 0 yet
    info = BackendInfo(backend="scripted", gpus=gpu_infos(1))
    procs = tuple(ProcessReading(pid, 2**30, 50.0, 10.0) for pid in (300, 301, 302))
    reading = tick(0, [GpuReading(0, 100.0, 0, procs)])
    backend = GpuTimeBackend(ScriptedBackend([reading], info), GpuTimeReader(folder, proc.root))
    assert backend.open().extra["gpu_time_dir"] == str(folder)
    got = {p.pid: p.gpu_busy_ns for p in backend.read(read_energy=False).gpus[0].processes}
    assert got == {300: 1_500, 301: 0, 302: None}  # 302 keeps no file


# -- the counters become each sample's busy time ------------------------------------------------------
def p(pid: int, busy_ns: int | None, sm: float = 50.0) -> ProcessReading:
    return ProcessReading(pid, 2**30, sm, 10.0, gpu_busy_ns=busy_ns)


def g(*procs: ProcessReading, power_w: float = 400.0) -> GpuReading:
    return GpuReading(0, power_w, 0, tuple(procs), signal="sm")


def methods_and_joules(sampler: Sampler) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, job in sampler.gpus[0].jobs.items():
        for method, joules in [*job.energy_j.items(), *job.pending_j.items()]:
            out.setdefault(key, {})
            out[key][method] = out[key].get(method, 0.0) + joules
    return out


def test_two_jobs_with_gpu_time_are_split_by_it() -> None:
    # A busy 0.75 s of each second, B 0.25 s; NVML's samples say the opposite
    ticks = [tick(0, [g(p(1, 0, 20), p(2, 0, 80))])]
    ticks += [tick(i, [g(p(1, i * 750_000_000, 20), p(2, i * 250_000_000, 80))]) for i in range(1, 5)]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2"})
    run_all(sampler)
    got = methods_and_joules(sampler)
    assert set(got["slurm/1"]) == set(got["slurm/2"]) == {"gpu_time"}
    assert got["slurm/1"]["gpu_time"] == pytest.approx(3 * got["slurm/2"]["gpu_time"])
    assert got["slurm/1"]["gpu_time"] + got["slurm/2"]["gpu_time"] == pytest.approx(4 * 400.0)
    # and /jobs says which jobs were exact, and how much GPU time they had
    doc = {j["job_key"]: j["gpus"][0] for j in jobs_document(sampler.snapshot())["jobs"]}
    assert (doc["slurm/1"]["gpu_time_s"], doc["slurm/1"]["gpu_time_samples"]) == (pytest.approx(3.0), 4)
    assert doc["slurm/2"]["gpu_time_s"] == pytest.approx(1.0)


def test_jobs_says_how_much_of_a_windowed_job_s_gpu_time_was_counted_rather_than_traced(tmp_path: Path) -> None:
    # B is launch-bound and traced in windows: of its 0.1 s a second, 0.095 s counted from its windows
    def pw(pid: int, i: int, per_s: int, estimated_per_s: int) -> ProcessReading:
        busy = i * per_s
        return ProcessReading(
            pid, 2**30, 50.0, 10.0, gpu_busy_ns=busy, gpu_busy_raw_ns=busy, gpu_busy_estimated_ns=i * estimated_per_s
        )

    ticks = [tick(i, [g(pw(1, i, 900_000_000, 0), pw(2, i, 100_000_000, 95_000_000))]) for i in range(5)]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2"})
    run_all(sampler)
    doc = {j["job_key"]: j["gpus"][0] for j in jobs_document(sampler.snapshot())["jobs"]}
    assert doc["slurm/2"]["gpu_time_s"] == pytest.approx(0.4)
    assert doc["slurm/2"]["gpu_time_estimated_s"] == pytest.approx(0.38)
    assert doc["slurm/1"]["gpu_time_estimated_s"] == 0.0
    # the estimated counter goes through a trace and its replay
    recorded = ProcessReading(2, 1, 5.0, 1.0, gpu_busy_ns=7, gpu_busy_raw_ns=7, gpu_busy_estimated_ns=5)
    row = recorder_process(recorded)
    assert replay_process(row).gpu_busy_estimated_ns == 5
    assert replay_process(recorder_process(replace(recorded, gpu_busy_estimated_ns=0))).gpu_busy_estimated_ns == 0


def test_jobs_says_none_for_a_job_that_never_reported_gpu_time() -> None:
    sampler, _ = make_sampler([tick(i, [g(p(1, None))]) for i in range(3)], jobs={1: "slurm/1"})
    run_all(sampler)
    (job,) = jobs_document(sampler.snapshot())["jobs"]
    assert job["gpus"][0]["gpu_time_s"] is None and job["gpus"][0]["gpu_time_samples"] == 0


def test_a_job_without_gpu_time_leaves_the_sample_to_nvml() -> None:
    ticks = [tick(i, [g(p(1, i * 750_000_000, 20), p(2, None, 80))]) for i in range(4)]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2"})
    run_all(sampler)
    got = methods_and_joules(sampler)
    assert set(got["slurm/1"]) == {"sm_time"}
    assert got["slurm/2"]["sm_time"] == pytest.approx(4 * got["slurm/1"]["sm_time"])


def test_a_process_new_in_the_sample_counts_its_whole_counter_one_seen_before_starts_a_baseline() -> None:
    ticks = [
        tick(0, [g(p(1, None))]),
        tick(1, [g(p(1, None), p(2, 600_000_000))]),  # 2 is new: its 0.6 s are this sample's
        tick(2, [g(p(1, 900_000_000), p(2, 1_200_000_000))]),  # 1 had no counter before: baseline
        tick(3, [g(p(1, 1_000_000_000), p(2, 1_700_000_000))]),
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2"})
    run_all(sampler)
    got = methods_and_joules(sampler)
    assert got["slurm/1"].keys() == {"sm_time", "gpu_time"}  # sm_time while 1 had no counter, then exact
    jobs = sampler.gpus[0].jobs
    # 2: 0.6 s in the sample it appeared in (its whole counter), then 0.6 and 0.5; 1: only the last 0.1 s
    assert jobs["slurm/2"].gpu_time_s == pytest.approx(1.7) and jobs["slurm/2"].gpu_time_samples == 3
    assert jobs["slurm/1"].gpu_time_s == pytest.approx(0.1) and jobs["slurm/1"].gpu_time_samples == 1


def test_a_counter_that_goes_back_is_not_trusted_for_that_sample() -> None:
    ticks = [tick(i, [g(p(1, b), p(2, i * 100_000_000))]) for i, b in enumerate([0, 500_000_000, 100, 300_000_100])]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2"})
    run_all(sampler)
    got = methods_and_joules(sampler)
    assert got["slurm/1"].keys() == {"gpu_time", "sm_time"}


def test_a_job_alone_teaches_its_own_power_and_the_gpu_its_idle_power() -> None:
    # idle 80 W; job 1 alone at 50 % GPU time and 380 W: 600 W per 100 % above idle
    ticks = [tick(i, [g(power_w=80.0)]) for i in range(3)]
    ticks += [tick(3 + i, [g(p(1, (i + 1) * 500_000_000), power_w=380.0)]) for i in range(6)]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1"})
    run_all(sampler)
    led = sampler.gpus[0]
    assert led.idle_power_w == pytest.approx(80.0)
    assert led.jobs["slurm/1"].solo_gpu_time.dynamic_w_per_sm_pct(80.0) == pytest.approx(6.0)
    # the sample in which it started is not one of it alone (listed at its end only): 5 of the 6
    assert sampler.gpu_time_typical["Test GPU"].n == 5


def test_jobs_and_idle_make_the_gpu_on_every_sample_through_record_and_replay(tmp_path: Path) -> None:
    ticks = [tick(0, [g(power_w=80.0)]), tick(1, [g(power_w=81.0)])]
    ticks += [tick(2 + i, [g(p(1, i * 900_000_000), power_w=650.0)]) for i in range(5)]
    ticks += [
        tick(7 + i, [g(p(1, 4 * 900_000_000 + i * 500_000_000), p(2, i * 400_000_000, 30), power_w=600.0)])
        for i in range(5)
    ]
    trace = write_trace(tmp_path / "t.jsonl", ticks, {1: JobInfo("slurm/1"), 2: JobInfo("slurm/2")})
    _, records = read_trace(trace)
    assert records[-1]["gpus"][0]["processes"][0][4] == 4 * 900_000_000 + 4 * 500_000_000
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    outputs: list[dict[str, object]] = []

    class Sink:
        def write_tick(self, reading: object, new_jobs: object, outs: list[dict[str, object]]) -> None:
            outputs.extend(outs)

    sampler = Sampler(
        backend, backend.open(), backend.resolver(), SamplerSettings(hostname="h", energy_interval_s=0.0), sink=Sink()
    )
    run_all(sampler)
    shared = [o for o in outputs if isinstance(o.get("jobs"), dict) and len(o["jobs"]) == 2]  # type: ignore[arg-type]
    assert len(shared) == 5 and all(m == "gpu_time" for o in shared for m, _ in o["jobs"].values())  # type: ignore[union-attr]
    for o in outputs:
        if "sample_j" in o:
            parts = math.fsum([o["idle_j"], *(j for _, j in o["jobs"].values())])  # type: ignore[union-attr]
            assert parts == pytest.approx(o["sample_j"], rel=1e-12)


def test_a_bad_counter_in_a_trace_is_refused(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.jsonl", [tick(0, [g(p(1, 5))])], {1: JobInfo("slurm/1")})
    head, *lines = trace.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["gpus"][0]["processes"][0][4] = "5"
    trace.write_text(head + "\n" + json.dumps(rec) + "\n")
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    backend.open()
    with pytest.raises(TraceFormatError):
        backend.read(read_energy=True)


def test_gpu_time_can_be_left_out_for_comparison() -> None:
    ticks = [tick(i, [g(p(1, i * 750_000_000, 20), p(2, i * 250_000_000, 80))]) for i in range(4)]
    sampler, _ = make_sampler(
        ticks,
        jobs={1: "slurm/1", 2: "slurm/2"},
        settings=SamplerSettings(hostname="h", energy_interval_s=0.0, gpu_time=False),
    )
    run_all(sampler)
    assert set(methods_and_joules(sampler)["slurm/1"]) == {"sm_time"}


# -- the split's arithmetic -------------------------------------------------------------------------
def load(pct: float | None) -> JobLoad:
    return JobLoad(2**30, 50.0, (), 10.0, pct)


def test_static_power_by_presence_the_rest_by_time_times_own_power() -> None:
    # 500 W: 100 W static (50 each), 400 W dynamic: a 60 % x 6 W = 360, b 40 % x 1.5 W = 60
    power = GpuTimePower(p0_w=100.0, own_w_per_pct={"a": 6.0, "b": 1.5})
    got = gpu_time_fractions({"a": load(60.0), "b": load(40.0)}, power, power_w=500.0)
    assert got["a"] == pytest.approx((50 + 400 * 360 / 420) / 500)
    assert got["b"] == pytest.approx((50 + 400 * 60 / 420) / 500)


def test_a_job_never_seen_alone_takes_the_typical_power_else_the_others_mean() -> None:
    jobs = {"a": load(50.0), "b": load(50.0)}
    typical = gpu_time_fractions(jobs, GpuTimePower(own_w_per_pct={"a": 6.0}, typical_w_per_pct=2.0), power_w=None)
    assert typical["a"] == pytest.approx(0.75)
    mean = gpu_time_fractions(jobs, GpuTimePower(own_w_per_pct={"a": 6.0}), power_w=None)
    assert mean["a"] == pytest.approx(0.5)
    plain = gpu_time_fractions(jobs, GpuTimePower(), power_w=None)
    assert plain == {"a": pytest.approx(0.5), "b": pytest.approx(0.5)}


def test_nobody_ran_anything_equal_parts() -> None:
    got = gpu_time_fractions({"a": load(0.0), "b": load(0.0), "c": load(0.0)}, GpuTimePower(p0_w=90.0), power_w=95.0)
    assert got == {k: pytest.approx(1 / 3) for k in "abc"}


@given(
    energy=st.floats(0, 5000),
    pcts=st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 150), min_size=2, max_size=6),
    own=st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 50), max_size=6),
    p0=st.one_of(st.none(), st.floats(-100, 1000)),
    power=st.one_of(st.none(), st.floats(0, 2000)),
    typical=st.one_of(st.none(), st.floats(0, 50)),
)
def test_gpu_time_conserves_every_sample(
    energy: float,
    pcts: dict[str, float],
    own: dict[str, float],
    p0: float | None,
    power: float | None,
    typical: float | None,
) -> None:
    jobs = {k: load(v) for k, v in pcts.items()}
    result = split_sample(energy, jobs, "sm", power_w=power, gpu_power=GpuTimePower(p0, own, typical))
    assert result.method == "gpu_time"
    assert math.isclose(sum(result.shares_j.values()), energy, rel_tol=1e-12, abs_tol=1e-9)
    assert all(v >= 0 for v in result.shares_j.values())


def test_the_agent_opens_the_folder_it_owns_to_every_job(tmp_path: Path) -> None:
    folder = tmp_path / "gputime"
    folder.mkdir(mode=0o755)
    GpuTimeReader(folder, tmp_path)
    assert (folder.stat().st_mode & 0o7777) == 0o1777
    GpuTimeReader(tmp_path / "absent", tmp_path)  # nothing there: nothing done, no error


# -- kernels: a power learned from one job, used for another ------------------------------------------
def pk(pid: int, busy_ns: int, kernels: dict[str, int], sm: float = 50.0) -> ProcessReading:
    return ProcessReading(pid, 2**30, sm, 10.0, gpu_busy_ns=busy_ns, gpu_kernels_ns=tuple(kernels.items()))


def test_a_job_never_seen_alone_takes_the_power_of_the_kernels_it_runs() -> None:
    # idle 80 W; job 1 alone runs kernel "mm" 100 % at 680 W (6 W per point above idle), then leaves;
    # job 3 alone runs "copy" 100 % at 380 W (3 W per point); then jobs 2 ("mm") and 4 ("copy"), never
    # seen alone, share the GPU half and half: 2 draws twice what 4 draws
    s = 1_000_000_000
    ticks = [tick(i, [g(power_w=80.0)]) for i in range(3)]
    ticks += [tick(3 + i, [g(pk(1, (i + 1) * s, {"mm": (i + 1) * s}), power_w=680.0)]) for i in range(5)]
    ticks += [tick(8 + i, [g(pk(3, (i + 1) * s, {"copy": (i + 1) * s}), power_w=380.0)]) for i in range(5)]
    h = s // 2
    ticks += [
        tick(
            13 + i,
            [g(pk(2, (i + 1) * h, {"mm": (i + 1) * h}), pk(4, (i + 1) * h, {"copy": (i + 1) * h}), power_w=530.0)],
        )
        for i in range(4)
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2", 3: "slurm/3", 4: "slurm/4"})
    run_all(sampler)
    table = sampler.gpu_time_kernels["Test GPU"]
    assert table["mm"].dynamic_w_per_sm_pct(80.0) == pytest.approx(6.0)
    assert table["copy"].dynamic_w_per_sm_pct(80.0) == pytest.approx(3.0)
    got = methods_and_joules(sampler)
    # each shared second: 80 W static, 40 each; 450 W dynamic, 2 : 1 -> 300 and 150
    assert got["slurm/2"]["gpu_time"] == pytest.approx(4 * 340.0)
    assert got["slurm/4"]["gpu_time"] == pytest.approx(4 * 190.0)


def test_unknown_kernels_leave_a_job_to_the_typical_power() -> None:
    s = 1_000_000_000
    ticks = [tick(i, [g(power_w=80.0)]) for i in range(2)]
    ticks += [tick(2 + i, [g(pk(1, (i + 1) * s, {"mm": (i + 1) * s}), power_w=680.0)]) for i in range(4)]
    h = s // 2
    ticks += [
        tick(
            6 + i,
            [g(pk(2, (i + 1) * h, {"other": (i + 1) * h}), pk(3, (i + 1) * h, {"mm": (i + 1) * h}), power_w=600.0)],
        )
        for i in range(3)
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2", 3: "slurm/3"})
    run_all(sampler)
    got = methods_and_joules(sampler)
    # the typical power is mm's (the only job seen alone): the two split evenly
    assert got["slurm/2"]["gpu_time"] == pytest.approx(got["slurm/3"]["gpu_time"])


def test_a_job_of_many_kernels_teaches_each_of_them_in_every_sample() -> None:
    # job 1 alone runs four kernels, a quarter of its time each, at 680 W (6 W per point above 80 W idle);
    # job 3 alone runs "copy" at 380 W (3 W per point). Jobs 2 (the four kernels) and 4 ("copy"), never
    # seen alone, then share half and half: 2 draws twice what 4 draws. Each of the four kernels took a
    # quarter of each of job 1's samples alone: seen in 4 samples, whatever its part of them.
    s, q = 1_000_000_000, 250_000_000
    four = ("qkv", "attn", "proj", "mlp")
    ticks = [tick(i, [g(power_w=80.0)]) for i in range(3)]
    ticks += [tick(3 + i, [g(pk(1, (i + 1) * s, {k: (i + 1) * q for k in four}), power_w=680.0)]) for i in range(5)]
    ticks += [tick(8 + i, [g(pk(3, (i + 1) * s, {"copy": (i + 1) * s}), power_w=380.0)]) for i in range(5)]
    h, e = s // 2, s // 8
    ticks += [
        tick(
            13 + i,
            [
                g(
                    pk(2, (i + 1) * h, {k: (i + 1) * e for k in four}),
                    pk(4, (i + 1) * h, {"copy": (i + 1) * h}),
                    power_w=530.0,
                )
            ],
        )
        for i in range(4)
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2", 3: "slurm/3", 4: "slurm/4"})
    run_all(sampler)
    got = methods_and_joules(sampler)
    # each shared second: 80 W static, 40 each; 450 W dynamic, 2 : 1 -> 300 and 150 (with the typical
    # power, 4.5 W per point, for job 2, it would have been 270 and 180)
    assert got["slurm/2"]["gpu_time"] == pytest.approx(4 * 340.0)
    assert got["slurm/4"]["gpu_time"] == pytest.approx(4 * 190.0)
    table = sampler.gpu_time_kernels["Test GPU"]
    assert all(table[k].dynamic_w_per_sm_pct(80.0) == pytest.approx(6.0) for k in four)


def test_the_sample_in_which_a_partner_left_teaches_nothing() -> None:
    # jobs 1 and 2 share at 700 W; 2 leaves within the sample ending at 6 s, in which 1 is listed alone
    # with 1.4 s of GPU time (time the two claimed together, settled once 2's file is gone) and the
    # GPU drew both jobs' power for part of it; then 1 alone at 100 % and 680 W (6 W per point above
    # 80 W idle). Taught as 1's power alone, that sample would make it 5.0 W per point.
    s = 1_000_000_000
    ticks = [tick(i, [g(power_w=80.0)]) for i in range(3)]
    ticks += [
        tick(3 + i, [g(pk(1, (i + 1) * s // 2, {"mm": (i + 1) * s // 2}), pk(2, (i + 1) * s // 2, {}), power_w=700.0)])
        for i in range(3)
    ]
    after = [int(1.5 * s + 1.4 * s), *(int(2.9 * s) + i * s for i in range(1, 5))]
    ticks += [tick(6 + i, [g(pk(1, b, {"mm": b}), power_w=620.0 if i == 0 else 680.0)]) for i, b in enumerate(after)]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2"})
    run_all(sampler)
    solo = sampler.gpus[0].jobs["slurm/1"].solo_gpu_time
    assert solo.dynamic_w_per_sm_pct(80.0) == pytest.approx(6.0) and solo.samples == 4
    assert sampler.gpu_time_kernels["Test GPU"]["mm"].dynamic_w_per_sm_pct(80.0) == pytest.approx(6.0)


def test_kernel_deltas() -> None:
    from fleetwatt_agent.sampler import kernel_deltas

    assert kernel_deltas({"a": 30, "b": 5}, {"a": 10, "b": 5}, new=False, dt_s=1.0) == {"a": 20}
    assert kernel_deltas({"a": 3 * 10**9}, {}, new=True, dt_s=1.0) == {"a": 3 * 10**9}  # started in the sample
    assert kernel_deltas({"a": 3 * 10**9, "b": 10**8}, {}, new=False, dt_s=1.0) == {"b": 10**8}  # rose: too big
    assert kernel_deltas({"a": 5}, {"a": 9}, new=False, dt_s=1.0) == {}  # went back


def test_kernels_go_through_the_file_the_trace_and_the_replay(proc: FakeProc, folder: Path, tmp_path: Path) -> None:
    ns = proc.add(300)
    doc = json.loads(state(300, ns, {UUID: 1_500}))
    doc["gpus"][0]["kernels"] = [["00ff00ff00ff00ff", 1_200, 7], ["0000000000000001", 300, 1]]
    (folder / f"{ns}-300.json").write_text(json.dumps(doc))
    got = GpuTimeReader(folder, proc.root).counters(300)
    assert got is not None and got[UUID].kernels_ns == (("00ff00ff00ff00ff", 1_200), ("0000000000000001", 300))
    doc["gpus"][0]["kernels"] = [["x", -1, 0]]
    assert parse_state(json.dumps(doc).encode()) is None
    trace = write_trace(tmp_path / "t.jsonl", [tick(0, [g(pk(1, 5, {"k": 4}))])], {1: JobInfo("slurm/1")})
    _, records = read_trace(trace)
    assert records[0]["gpus"][0]["processes"][0][4:] == [5, {"k": 4}]
    backend = ReplayBackend(trace, speed=0, keep_time=True)
    backend.open()
    assert backend.read(read_energy=True).gpus[0].processes[0].gpu_kernels_ns == (("k", 4),)


# -- time two processes both claim is shared -----------------------------------------------------------
def test_share_bin_keeps_what_fits_and_splits_the_excess() -> None:
    assert share_bin([3_000, 4_000], 10_000) == [3_000, 4_000]  # fits: each its own
    assert share_bin([8_000, 6_000], 10_000) == [6_000, 4_000]  # 4 ms claimed twice: 2 ms off each
    assert share_bin([10_000, 500], 10_000) == [9_750, 250]
    assert share_bin([10_000, 10_000, 10_000], 10_000) == [3_333, 3_333, 3_333]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=6))
def test_shared_bins_never_exceed_the_bin_nor_what_each_claimed(busy: list[int]) -> None:
    got = share_bin(busy, 10_000)
    assert all(0 <= g <= b for g, b in zip(got, busy, strict=True))
    assert min(sum(busy), 10_000) - len(busy) <= sum(got) <= min(sum(busy), 10_000)


def test_time_too_short_to_hold_a_slice_stays_whole_and_the_stretch_covering_it_gives_way() -> None:
    # a launch-bound process's 750 µs of microsecond kernels inside the other's 10 ms kernel (on hold)
    assert share_bin([10_000, 750], 10_000, [0, 750]) == [9_250, 750]
    assert share_bin([10_000, 750], 10_000) == [9_625, 375]  # not known short: halved, as before
    assert share_bin([10_000, 10_000], 10_000, [0, 0]) == [5_000, 5_000]  # two long claims: as before
    assert share_bin([8_000, 3_000], 10_000, [0, 1_000]) == [7_500, 2_500]  # 1 ms short kept, 1 ms excess halved
    assert share_bin([6_000, 6_000], 10_000, [6_000, 6_000]) == [5_000, 5_000]  # short claims past the bin


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=5),
)
def test_shared_bins_with_short_time_never_exceed_the_bin_nor_a_claim(claims: list[tuple[int, int]]) -> None:
    busy = [b for b, _ in claims]
    short = [min(s, b) for b, s in claims]
    got = share_bin(busy, 10_000, short)
    assert all(0 <= g <= b for g, b in zip(got, busy, strict=True))
    assert sum(got) <= 10_000
    assert min(sum(busy), 10_000) - 2 * len(busy) <= sum(got)
    if sum(short) <= 10_000:
        assert all(g >= s - 1 for g, s in zip(got, short, strict=True))  # short time kept whole


BIN = 10_000_000  # 10 ms


def counters(written_s: float, first_bin: int, bins: list[int], busy: int = 0) -> GpuCounters:
    return GpuCounters(busy, (), int(written_s * 1e9), BIN, first_bin, tuple(bins))


def test_a_process_alone_keeps_its_union_counter_with_no_delay() -> None:
    shared = SharedTime()
    assert shared.counters({1: counters(4.0, 100, [10_000] * 300, busy=3_000_000_000)}) == {1: 3_000_000_000}
    got = shared.counters({1: counters(5.0, 200, [10_000] * 300, busy=3_900_000_000)})
    assert got == {1: 3_900_000_000}  # nothing claimed by another: its whole rise, at once


def test_time_two_processes_claim_together_is_halved() -> None:
    shared = SharedTime()
    both = [10_000] * 300  # each claims every 10 ms of the last 3 s, and ran nothing before
    first = shared.counters({1: counters(4.0, 100, both, busy=3 * 10**9), 2: counters(4.0, 100, both, busy=3 * 10**9)})
    assert first == {1: 15 * 10**8, 2: 15 * 10**8}  # final bins halved, the rest at the same ratio
    got = shared.counters({1: counters(5.0, 200, both, busy=4 * 10**9), 2: counters(5.0, 200, both, busy=4 * 10**9)})
    assert got == {1: 2 * 10**9, 2: 2 * 10**9}  # each rose 1 s and keeps half


def _files_at(t_s: float, busy: dict[int, list[tuple[float, float]]]) -> dict[int, GpuCounters]:
    """What each process's file says at `t_s`: its union counter and its last 300 bins of 10 ms, for
    processes whose kernels covered `busy` (pid -> intervals in seconds), those begun by then."""
    last = int(t_s * 100)
    out = {}
    for pid, spans in busy.items():
        if spans[0][0] > t_s:
            continue
        cut = [(a, min(b, t_s)) for a, b in spans if a < t_s]
        bins = []
        for k in range(last - 299, last + 1):
            lo, hi = k / 100, (k + 1) / 100
            bins.append(round(sum(max(min(b, hi) - max(a, lo), 0.0) for a, b in cut) * 1e6))
        union = round(sum(b - a for a, b in cut) * 1e9)
        out[pid] = counters(t_s, last - 299, bins, busy=union)
    return out


def test_a_process_joined_by_another_is_settled_to_its_exact_share() -> None:
    # 1 runs alone from 1 s, 2 joins at 5 s, both busy to 30 s; read every 0.5 s as the agent does
    busy = {1: [(1.0, 30.0)], 2: [(5.0, 30.0)]}
    shared, previous = SharedTime(), {1: 0, 2: 0}
    for half_s in range(4, 61):
        t = half_s / 2
        got = shared.counters(_files_at(t, busy))
        assert got is not None
        for pid, value in got.items():
            assert value >= previous[pid]  # counters never go back
            previous[pid] = value
        # exact: alone its whole time, shared half; the estimate errs by at most the last 1.2 s or so
        exact_1 = (min(t, 5.0) - 1.0) + max(t - 5.0, 0.0) / 2
        assert got[1] / 1e9 == pytest.approx(exact_1, abs=0.65)
        if t <= 5.0:
            assert got[1] == pytest.approx((t - 1.0) * 1e9, abs=2e7)  # alone: no delay
    # once the bins are final the error is gone: it does not add up over the run
    assert shared.counters(_files_at(31.5, busy)) == pytest.approx({1: 16.5e9, 2: 12.5e9}, rel=2e-3)


def test_a_process_left_by_another_keeps_only_its_share_of_what_they_claimed_together() -> None:
    # 1 and 2 both busy from 1 s; 2 exits at 20.3 s (its file, written as it exited, read once more at
    # the first tick it is no longer listed), 1 runs on alone to 30 s; read every 0.5 s
    busy = {1: [(1.0, 30.0)], 2: [(1.0, 20.3)]}
    exit_state = _files_at(20.3, busy)[2]
    shared, previous = SharedTime(), 0
    for half_s in range(4, 64):
        t = half_s / 2
        files = _files_at(t, busy)
        gone = None
        if t > 20.3:
            del files[2]
            gone = {2: exit_state} if shared.leaving(files) else None
        got = shared.counters(files, gone)
        assert got is not None and got[1] >= previous
        previous = got[1]
        exact_1 = (min(t, 20.3) - 1.0) / 2 + max(min(t, 30.0) - 20.3, 0.0)
        assert got[1] / 1e9 == pytest.approx(exact_1, abs=0.65)  # the estimate of the last second or so
    # half of the 19.3 s they shared, then the 9.7 s alone: 19.35 s, not the time of the last second
    # they shared counted whole (about 0.6 s more)
    assert got[1] / 1e9 == pytest.approx(19.35, abs=0.02)
    assert not shared.gone  # its bins all shared: forgotten


def test_a_process_gone_without_a_last_file_claims_what_its_last_reading_held() -> None:
    busy = {1: [(1.0, 30.0)], 2: [(1.0, 20.0)]}
    shared = SharedTime()
    for half_s in range(4, 64):
        t = half_s / 2
        files = _files_at(t, busy)
        if t > 20.0:
            del files[2]
        got = shared.counters(files)
    assert got is not None and got[1] / 1e9 == pytest.approx(9.5 + 10.0, abs=0.02)


def test_bursts_beside_a_busy_process_are_charged_what_they_ran() -> None:
    # 2 computes 40 ms of every 100 ms beside 1, busy all along: of each burst, half was 2's
    busy = {1: [(1.0, 31.0)], 2: [(1.0 + k / 10, 1.04 + k / 10) for k in range(300)]}
    shared = SharedTime()
    for half_s in range(4, 65):
        got = shared.counters(_files_at(half_s / 2, busy))
    assert got == pytest.approx({1: 24e9, 2: 6e9}, rel=5e-3)  # 2: 12 s claimed, 6 s its own


def test_a_process_that_claims_less_keeps_what_only_it_ran() -> None:
    # 1 claims every bin; 2 claims every other bin: bins both claim are halved, the rest is 1's alone
    shared = SharedTime()
    a, b = [10_000] * 300, [10_000 if i % 2 else 0 for i in range(300)]
    shared.counters({1: counters(4.0, 100, a, busy=0), 2: counters(4.0, 100, b, busy=0)})
    assert shared.ratio(1) == pytest.approx(0.75, abs=0.01) and shared.ratio(2) == pytest.approx(0.5)


def test_a_launch_bound_process_keeps_its_short_time_beside_a_busy_one() -> None:
    # 1 busy all along; 2 launches microsecond kernels, 0.75 ms of every 10 ms: its time stays its own
    shared = SharedTime()
    a = GpuCounters(0, (), int(4e9), BIN, 100, (10_000,) * 300)
    b = GpuCounters(0, (), int(4e9), BIN, 100, (750,) * 300, (750,) * 300)
    shared.counters({1: a, 2: b})
    assert shared.ratio(2) == 1.0 and shared.ratio(1) == pytest.approx(0.925)


def test_an_older_library_leaves_every_union_counter_as_it_is() -> None:
    shared = SharedTime()
    assert shared.counters({1: counters(6.0, 300, [10_000] * 300), 3: GpuCounters(5)}) is None


def test_a_stale_file_does_not_hold_the_others_back() -> None:
    shared = SharedTime()
    shared.counters({1: counters(10.0, 700, [10_000] * 300), 2: counters(2.0, 0, [0] * 300)})
    done = shared.done_bin
    shared.counters({1: counters(11.0, 800, [10_000] * 300), 2: counters(2.0, 0, [0] * 300)})
    assert done is not None and shared.done_bin == done + 100  # 1 s more of bins, though 2 stopped writing


def test_the_backend_shares_what_two_processes_claim_together(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(300)
    proc.add(301)
    info = BackendInfo(backend="scripted", gpus=gpu_infos(1))
    procs = (ProcessReading(300, 2**30, 50.0, 10.0), ProcessReading(301, 2**30, 50.0, 10.0))
    reading = tick(0, [GpuReading(0, 100.0, 0, procs)])
    backend = GpuTimeBackend(ScriptedBackend([reading, reading], info), GpuTimeReader(folder, proc.root))
    backend.open()

    def write(pid: int, written_s: float, busy_ns: int) -> None:
        doc = json.loads(state(pid, ns, {UUID: busy_ns}))
        doc["written_ns"] = int(written_s * 1e9)
        first = int(written_s * 100) - 299
        doc["gpus"][0].update({"bin_ns": BIN, "bins_from": first, "bins_us": [10_000] * 300})
        (folder / f"{ns}-{pid}.json").write_text(json.dumps(doc))

    write(300, 4.0, 3 * 10**9)
    write(301, 4.0, 3 * 10**9)
    backend.read(read_energy=False)
    write(300, 5.0, 4 * 10**9)
    write(301, 5.0, 4 * 10**9)
    got = {p.pid: (p.gpu_busy_ns, p.gpu_busy_raw_ns) for p in backend.read(read_energy=False).gpus[0].processes}
    # each claimed every bin with the other for 4 s: half is its own
    assert got == {300: (2 * 10**9, 4 * 10**9), 301: (2 * 10**9, 4 * 10**9)}


def test_the_backend_reads_a_leaving_process_file_once_more(proc: FakeProc, folder: Path) -> None:
    ns = proc.add(300)
    proc.add(301)
    info = BackendInfo(backend="scripted", gpus=gpu_infos(1))
    both = (ProcessReading(300, 2**30, 50.0, 10.0), ProcessReading(301, 2**30, 50.0, 10.0))
    alone = tick(1, [GpuReading(0, 100.0, 0, both[:1])])
    readings = [tick(0, [GpuReading(0, 100.0, 0, both)]), alone, alone]
    backend = GpuTimeBackend(ScriptedBackend(readings, info), GpuTimeReader(folder, proc.root))
    backend.open()

    def write(pid: int, written_s: float, busy_ns: int, *, final: bool = False) -> None:
        doc = json.loads(state(pid, ns, {UUID: busy_ns}, final=final))
        doc["written_ns"] = int(written_s * 1e9)
        first = int(written_s * 100) - 299
        doc["gpus"][0].update({"bin_ns": BIN, "bins_from": first, "bins_us": [10_000] * 300})
        (folder / f"{ns}-{pid}.json").write_text(json.dumps(doc))

    write(300, 4.0, 3 * 10**9)
    write(301, 4.0, 3 * 10**9)
    backend.read(read_energy=False)
    write(300, 5.0, 4 * 10**9)
    write(301, 4.6, 36 * 10**8, final=True)  # it exited at 4.6 s; the driver lists it no more
    backend.read(read_energy=False)
    # its file as it exited, read once more, holds its claims until they are shared
    assert backend._shared[0].gone[301].written_ns == 4_600_000_000
    write(300, 6.0, 5 * 10**9)
    backend.read(read_energy=False)
    assert 301 not in backend._shared[0].gone  # every bin it claimed is shared (up to 4.8 s: final at 6.0)


def test_a_file_from_the_future_or_with_huge_bins_cannot_stall_the_agent(proc: FakeProc, folder: Path) -> None:
    # a state dated a day ahead is not believed
    ns = proc.add(300)
    doc = json.loads(state(300, ns, {UUID: 5}))
    doc["written_ns"] = time.time_ns() + 86_400 * 10**9
    (folder / f"{ns}-300.json").write_text(json.dumps(doc))
    assert GpuTimeReader(folder, proc.root).counters(300) is None
    # and however far apart two readings' clocks are, one tick walks at most MAX_WALK_BINS bins, a claim
    # at most a whole bin
    shared = SharedTime()
    shared.counters({1: counters(4.0, 100, [10**12] * 300)})
    started = time.monotonic()
    shared.counters({1: counters(4.0e8, 200, [10**12] * 300)})  # a reading whose clock says 12 years later
    assert time.monotonic() - started < 1.0
    assert all(claimed <= 10_000 for _, claimed in shared.accounts[1].recent)
