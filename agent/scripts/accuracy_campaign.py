"""The accuracy campaign (docs/accuracy.md): how right is the agent's split of a shared GPU?

On GPU 0, with the product's agent running beside it as deployed (`--backend nvml --record`):
  1. the GPU idle, nothing on it, for --idle-s seconds (its idle power);
  2. one `calibrate` process sizes each workload so that it takes about --target-s seconds alone;
  3. --reps times: each workload ALONE, then each mix (2 or 3 workloads started together), every run a
     fixed amount of work (accuracy_workloads.py), the GPU idle between runs.
A monitor thread reads the driver's energy counter, power and process list --monitor-hz times a second
(independently of the agent), so each run's energy is known over exactly the time its processes were on
the GPU. A second thread keeps every raw per-process utilisation sample the driver holds
(nvmlDeviceGetProcessUtilization from timestamp 0, --util-hz times a second, each sample once), so the
driver's own sampling can be studied apart from the agent's reading of it. --stagger-s starts each job of
a mix that many seconds after the one before it, so that the first is seen alone before it shares
(--stagger-reversed: the last named starts first).
--gputime-lib PATH (agent/gputime/build.sh's libfleetwatt_gputime.so) runs every workload with the exact
GPU-time injection library and the agent reading its files; each run's every busy interval (the library's
dump) is reduced to each process's busy seconds, 100 ms bins and the time it overlapped the others'.
--overhead-reps N first runs each of --overhead-kinds alone N times without and with the library, to
measure what it costs a job (each run held to the same CPUs, --overhead-cpus, which the campaign's own
threads, the agent's and the next job's start keep off meanwhile); --overhead-only stops there.
Nothing here changes a setting of the GPU.

Writes into --out: campaign.json.gz (everything measured: the runs, the monitor's samples, the GPU's
settings as read), trace.jsonl.gz (the agent's recording: replayed by the tests), agent.log, run.log,
and results.json (accuracy_analysis.py's table, also printed). Exit status 0 when every run finished.
--dry-run: no GPU (fake NVML, sleeping workloads), to check the plumbing anywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
AGENT_SRC = HERE.parent
REPO = AGENT_SRC.parent
sys.path.insert(0, str(AGENT_SRC))
sys.path.insert(0, str(HERE))

import accuracy_analysis  # noqa: E402
from gpu_two_jobs import agent_command, agent_url  # noqa: E402

ALONE = ("mm", "copy", "xfmr", "duty", "tiny", "holder")
MIXES: dict[str, tuple[str, ...]] = {
    "mm+copy": ("mm", "copy"),
    "mm+xfmr": ("mm", "xfmr"),
    "copy+xfmr": ("copy", "xfmr"),
    "mm+duty": ("mm", "duty"),
    "copy+duty": ("copy", "duty"),
    "mm+tiny": ("mm", "tiny"),
    "copy+tiny": ("copy", "tiny"),
    "mm+holder": ("mm", "holder"),
    "mm+copy+duty": ("mm", "copy", "duty"),
}
DUTY_BUSY_S = 0.040  # with accuracy_workloads.DUTY_SLEEP_S = 0.060: busy 40 % alone

# The dry run's pretend GPU: dynamic watts, SM % and memory % of each kind alone.
FAKE_PROFILE = {
    "mm": (600.0, 100, 40),
    "copy": (350.0, 100, 95),
    "xfmr": (500.0, 100, 55),
    "duty": (240.0, 40, 16),
    "tiny": (60.0, 30, 2),
    "holder": (15.0, 2, 1),
}
FAKE_IDLE_W = 80.0


@dataclass
class Child:
    kind: str
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None  # reads its stdout into `lines`; ends when the process does
    working_since: float | None = None


class Campaign:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(args.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.log_file = open(self.out / "run.log", "a", buffering=1)  # noqa: SIM115 - closed at exit
        self.t0 = time.time()
        self.control = self.work / "fake_nvml_state.json" if args.dry_run else None
        self.fake_history: list[list[float]] = []
        self.children: dict[int, Child] = {}
        self.monitor_rows: list[tuple[float, int, int, int, int, tuple[int, ...]]] = []
        self.util_samples: dict[tuple[int, int], list[float]] = {}  # (pid, driver µs) -> [read at, sm, mem]
        self.stop_monitor = threading.Event()
        self.agent: subprocess.Popen[bytes] | None = None
        self.agent_log: IO[bytes] | None = None
        self.gputime_dir = self.work / "gputime"
        self.dump_prefix = self.work / "dumps" / "intervals"
        if args.gputime_lib:
            self.gputime_dir.mkdir(parents=True, exist_ok=True)
            self.dump_prefix.parent.mkdir(parents=True, exist_ok=True)
        if self.control is not None:
            os.environ["FAKE_NVML_STATE"] = str(self.control)
            sys.path.insert(0, str(REPO / "tests" / "agent" / "fake_nvml"))
            self._fake_write()
        import pynvml

        self.nvml: Any = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_file.write(line + "\n")

    def env(self, gputime: bool = False, dump: bool = True) -> dict[str, str]:
        env = dict(os.environ)
        if gputime and self.args.gputime_lib:
            env["CUDA_INJECTION64_PATH"] = str(Path(self.args.gputime_lib).resolve())
            env["FLEETWATT_GPUTIME_DIR"] = str(self.gputime_dir)
            if dump:
                env["FLEETWATT_GPUTIME_DUMP"] = str(self.dump_prefix)
        paths = [str(AGENT_SRC)]
        if self.control is not None:
            paths.insert(0, str(REPO / "tests" / "agent" / "fake_nvml"))
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    # -- the GPU as read, independently of the agent -----------------------------------------------
    def gpu_facts(self) -> dict[str, Any]:
        """What the GPU is set to (read only: nothing here sets anything)."""
        n, h = self.nvml, self.handle
        facts: dict[str, Any] = {}
        for key, fn, args in (
            ("name", "nvmlDeviceGetName", ()),
            ("uuid", "nvmlDeviceGetUUID", ()),
            ("driver", "nvmlSystemGetDriverVersion", None),
            ("power_limit_mw", "nvmlDeviceGetPowerManagementLimit", ()),
            ("enforced_power_limit_mw", "nvmlDeviceGetEnforcedPowerLimit", ()),
            ("persistence_mode", "nvmlDeviceGetPersistenceMode", ()),
            ("accounting_mode", "nvmlDeviceGetAccountingMode", ()),
            ("compute_mode", "nvmlDeviceGetComputeMode", ()),
            ("mig_mode", "nvmlDeviceGetMigMode", ()),
            ("max_sm_clock_mhz", "nvmlDeviceGetMaxClockInfo", (1,)),
            ("max_mem_clock_mhz", "nvmlDeviceGetMaxClockInfo", (2,)),
        ):
            f = getattr(n, fn, None)
            if f is None:
                continue
            try:
                value = f() if args is None else f(h, *args)
            except Exception as exc:
                value = f"unavailable: {exc}"
            facts[key] = value.decode() if isinstance(value, bytes) else value
        plain: dict[str, Any] = json.loads(json.dumps(facts, default=str))
        return plain

    def monitor(self) -> None:
        n, h = self.nvml, self.handle
        period = 1.0 / self.args.monitor_hz
        next_at = time.monotonic()
        while not self.stop_monitor.is_set():
            t = time.time()
            try:
                if self.control is not None:
                    self._fake_write()
                energy = int(n.nvmlDeviceGetTotalEnergyConsumption(h))
                power = int(n.nvmlDeviceGetPowerUsage(h))
                pids = tuple(sorted(int(p.pid) for p in n.nvmlDeviceGetComputeRunningProcesses(h)))
            except Exception as exc:
                self.log(f"monitor: {exc!r}")
                energy, power, pids = -1, -1, ()
            temp = clock = -1
            if self.control is None:
                try:
                    temp = int(n.nvmlDeviceGetTemperature(h, 0))
                    clock = int(n.nvmlDeviceGetClockInfo(h, 1))
                except n.NVMLError:
                    pass
            self.monitor_rows.append((t, energy, power, temp, clock, pids))
            next_at += period
            self.stop_monitor.wait(max(next_at - time.monotonic(), 0.0))

    def util_sampler(self) -> None:
        """Every raw per-process utilisation sample in the driver's buffer, each kept once."""
        n, h = self.nvml, self.handle
        period = 1.0 / self.args.util_hz
        while not self.stop_monitor.wait(period):
            try:
                samples = n.nvmlDeviceGetProcessUtilization(h, 0)
            except n.NVMLError:
                continue  # NOT_FOUND: nothing in the buffer
            t = time.time()
            for x in samples:
                key = (int(x.pid), int(x.timeStamp))
                if key[0] > 0 and key not in self.util_samples:
                    self.util_samples[key] = [t, float(x.smUtil), float(getattr(x, "memUtil", 0) or 0)]

    # -- the dry run's pretend GPU ------------------------------------------------------------------
    def _fake_write(self) -> None:
        assert self.control is not None
        working = {
            pid: c for pid, c in list(self.children.items()) if c.working_since is not None and c.proc.poll() is None
        }
        share = 1.0 / max(len(working), 1)
        power = FAKE_IDLE_W + sum(FAKE_PROFILE[c.kind][0] * share for c in working.values())
        procs = {
            str(pid): {
                "mem": 2**30,
                "sm": max(int(FAKE_PROFILE[c.kind][1] * share), 1),
                "memutil": int(FAKE_PROFILE[c.kind][2] * share),
            }
            for pid, c in working.items()
        }
        if not self.fake_history or self.fake_history[-1][1] != power:
            self.fake_history.append([time.time(), power])
        state = {"gpus": [{"power_w": power, "procs": procs, "history": self.fake_history}]}
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.control)

    # -- the agent ------------------------------------------------------------------------------------
    def start_agent(self) -> None:
        gputime = ["--gpu-time-dir", str(self.gputime_dir) if self.args.gputime_lib else ""]
        cmd = agent_command(
            "h200-accuracy", ["--record", str(self.work / "trace.jsonl"), *gputime, *self.args.agent_arg]
        )
        self.log(f"start agent: {' '.join(cmd[1:])}")
        self.agent_log = open(self.out / "agent.log", "ab")  # noqa: SIM115 - closed at exit
        self.agent = subprocess.Popen(cmd, env=self.env(), stdout=subprocess.PIPE, stderr=self.agent_log)
        base = agent_url(self.agent, "accuracy")
        self.log(f"agent ready at {base} (pid {self.agent.pid})")

    def stop_agent(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.agent.kill()
        if self.agent_log is not None:
            self.agent_log.close()

    # -- the workloads --------------------------------------------------------------------------------
    def spawn(
        self,
        kind: str,
        iters: int,
        burst: int = 1,
        gputime: bool = True,
        dump: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> Child:
        cmd = [sys.executable, str(HERE / "accuracy_workloads.py"), kind, "--iters", str(iters), "--burst", str(burst)]
        if kind == "calibrate":
            cmd += ["--seconds", str(self.args.calibrate_s)]
        if self.args.dry_run:
            cmd += ["--fake", str(self.args.fake_unit_s)]
        proc = subprocess.Popen(
            cmd,
            env={**self.env(gputime=gputime and kind != "calibrate", dump=dump), **(extra_env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log_file,
            text=True,
        )
        child = Child(kind, proc)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                child.lines.append(line.rstrip("\n"))
                if line.strip() == "imported":
                    child.ready.set()
            child.ready.set()

        child.reader = threading.Thread(target=read, daemon=True)
        child.reader.start()
        return child

    def run_group(self, label: str, rep: int, children: list[Child], cpus: set[int] | None = None) -> dict[str, Any]:
        for c in children:
            if not c.ready.wait(120):
                raise SystemExit(f"{label}: {c.kind} never imported")
        self.wait_idle()
        t_go = time.time()
        start_order = list(reversed(children)) if self.args.stagger_reversed else children
        for k, c in enumerate(start_order):
            if k and self.args.stagger_s > 0:
                time.sleep(self.args.stagger_s)
            self.children[c.proc.pid] = c
            if cpus:  # its main thread now, so CUDA's threads and the library's, made after "go", too
                os.sched_setaffinity(c.proc.pid, cpus)
            c.working_since = time.time()
            assert c.proc.stdin is not None
            c.proc.stdin.write("go\n")
            c.proc.stdin.flush()
        deadline = t_go + self.args.run_timeout_s
        status = "ok"
        for c in children:
            try:
                c.proc.wait(timeout=max(deadline - time.time(), 0.1))
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
                status = f"timeout after {self.args.run_timeout_s:.0f} s"
            if c.proc.returncode != 0 and status == "ok":
                status = f"{c.kind} exited {c.proc.returncode}"
        t_done = time.time()
        jobs = []
        for c in children:
            if c.reader is not None:
                c.reader.join(timeout=5)  # its last line, the report, is read
            report = next((json.loads(x) for x in reversed(c.lines) if x.startswith("{")), None)
            jobs.append({"kind": c.kind, "pid": c.proc.pid, "report": report})
        result = {"label": label, "rep": rep, "t_go": t_go, "t_done": t_done, "status": status, "jobs": jobs}
        if self.args.gputime_lib:
            result["gputime"] = gputime_reduce(
                self.dump_prefix, [c.proc.pid for c in children], t_go, states=self.gputime_dir
            )
        self.log(
            f"{label} rep {rep}: {t_done - t_go:.1f} s {status} "
            + " ".join(f"{c.kind}={c.proc.pid}" for c in children)
            + _busy_note(result.get("gputime"))
        )
        return result

    def wait_idle(self, quiet_s: float = 1.5, timeout: float = 60.0) -> None:
        """Until the driver has listed no process for `quiet_s` (the agent sees each run end)."""
        start = time.time()
        while time.time() - start < timeout:
            recent = [
                r
                for r in self.monitor_rows[-int(quiet_s * self.args.monitor_hz) - 2 :]
                if r[0] >= time.time() - quiet_s
            ]
            if recent and recent[0][0] <= time.time() - quiet_s + 0.2 and not any(r[5] for r in recent):
                return
            time.sleep(0.1)
        self.log("warning: the GPU still lists processes")

    def idle_window(self, seconds: float) -> dict[str, float]:
        self.wait_idle()
        t0 = time.time()
        time.sleep(seconds)
        return {"t0": t0, "t1": time.time()}


# The ways a job runs in the overhead runs: without the library, with it as shipped, and two that say where
# its cost lies. `cupti`: CUPTI traces every kernel and the library throws the records away unread (the cost of
# CUPTI's tracing alone; its state file says nothing). `per-thread`: CUPTI fills a buffer per launching thread
# and makes its device buffers larger, so the thread that launches never waits on the one that reads.
# `every-kernel`: the library tracing every kernel whatever the process's pace (no windows: as it was before
# a launch-bound process was traced in windows).
VARIANTS: dict[str, dict[str, str] | None] = {
    "plain": None,
    "gputime": {},
    "every-kernel": {"FLEETWATT_GPUTIME_WINDOW_ABOVE": "0"},
    "cupti": {"FLEETWATT_GPUTIME_RECORDS": "discard"},
    "per-thread": {"FLEETWATT_GPUTIME_PER_THREAD_BUFFERS": "1", "FLEETWATT_GPUTIME_DEVICE_BUFFER_MB": "32"},
}


def overhead(c: Campaign, kinds: list[str], iters: dict[str, int], burst: int) -> dict[str, Any]:
    """Each kind alone, --overhead-reps times in each of --overhead-variants (without the library, with it,
    and the diagnostic ways of VARIANTS; the order turned every repetition): its work time (t_end - t_ready:
    the fixed work, after the context and tensors are ready) and its start (t_ready - t_go: CUDA's start,
    where the library loads). Each run on the same CPUs (--overhead-cpus): a launch-bound job's pace is its
    CPU's, which differs from core to core; the campaign's threads (the monitor reads the driver 20 times a
    second), the agent's and the next job's start (it imports torch while this one runs) are held to the
    other CPUs meanwhile. Each variant's cost is read against the run without in the same repetition."""
    variants = overhead_variants(c.args.overhead_variants)
    cpus = overhead_cpus(c.args.overhead_cpus)
    others = (os.sched_getaffinity(0) - cpus) if cpus else set()
    c.log(f"overhead runs on CPUs {sorted(cpus) if cpus else 'as scheduled'}, the rest on {sorted(others) or '-'}")
    runs: list[dict[str, Any]] = []
    plan = []
    for rep in range(c.args.overhead_reps):
        turn = rep % len(variants)
        order = variants[turn:] + variants[:turn]
        for kind in kinds:
            plan += [(rep, kind, variant) for variant in order]
    if not plan:
        return {"runs": [], "kinds": {}}
    everywhere = os.sched_getaffinity(0)
    held = [os.getpid(), *([c.agent.pid] if c.agent is not None else [])]
    for pid in held:
        hold_threads(pid, others)

    def spawn(kind: str, variant: str) -> Child:
        extra = VARIANTS[variant]
        child = c.spawn(kind, iters[kind], burst, gputime=extra is not None, dump=False, extra_env=extra)
        hold_threads(child.proc.pid, others)  # its import, before "go" pins it to `cpus`
        return child

    spawned = spawn(plan[0][1], plan[0][2])
    for i, (rep, kind, variant) in enumerate(plan):
        child = spawned
        if i + 1 < len(plan):
            _, k2, v2 = plan[i + 1]
            spawned = spawn(k2, v2)
        result = c.run_group(f"overhead:{kind}:{variant}", rep, [child], cpus=cpus)
        report = result["jobs"][0]["report"] or {}
        if result["status"] == "ok" and report:
            runs.append(
                {
                    "kind": kind,
                    "rep": rep,
                    "variant": variant,
                    "gputime": variant != "plain",
                    "work_s": report["t_end"] - report["t_ready"],
                    "start_s": report["t_ready"] - report["t_go"],
                    **library_said(c.gputime_dir, child.proc.pid),
                }
            )
    for pid in held:
        hold_threads(pid, everywhere)
    summary: dict[str, Any] = {}
    for kind in kinds:
        mine = [r for r in runs if r["kind"] == kind]
        plain = [r for r in mine if r["variant"] == "plain"]
        costs = {v: variant_cost(plain, [r for r in mine if r["variant"] == v], iters[kind]) for v in variants}
        costs = {v: cost for v, cost in costs.items() if v != "plain" and cost}
        if not costs:
            continue
        shipped = costs.get("gputime") or next(iter(costs.values()))
        summary[kind] = {
            "plain_s": shipped["plain_s"],
            "gputime_s": shipped["with_s"],
            **{k: v for k, v in shipped.items() if k not in ("plain_s", "with_s")},
            "plain_runs": [round(r["work_s"], 4) for r in plain],
            "gputime_runs": shipped["runs"],
            "variants": costs,
        }
        del summary[kind]["runs"]
        c.log(f"overhead {kind}: {summary[kind]}")
    return {"runs": runs, "kinds": summary, "cpus": sorted(cpus) if cpus else None, "variants": variants}


def library_said(directory: Path, pid: int) -> dict[str, Any]:
    """What the library's last state file of a process says of its GPU time: busy seconds, of them those
    counted from windows, and whether it was tracing in windows (empty where it kept no file)."""
    state = next(iter(directory.glob(f"*-{pid}.json")), None) if directory.is_dir() else None
    if state is None:
        return {}
    try:
        doc = json.loads(state.read_text())
        gpus = doc.get("gpus") or []
        return {
            "busy_s": sum(g.get("busy_ns", 0) for g in gpus) / 1e9,
            "estimated_s": sum(g.get("estimated_ns", 0) for g in gpus) / 1e9,
            "records": sum(g.get("records", 0) for g in gpus),
            "windowed": bool(doc.get("windowed")),
        }
    except (OSError, ValueError, AttributeError):
        return {}


def variant_cost(plain: list[dict[str, Any]], runs: list[dict[str, Any]], iters: int) -> dict[str, Any]:
    """One variant's runs against those without the library: the pooled means, their difference in percent,
    the mean start, and the pairs of each repetition (paired_overhead)."""
    if not plain or not runs:
        return {}
    p = sum(r["work_s"] for r in plain) / len(plain)
    w = sum(r["work_s"] for r in runs) / len(runs)
    return {
        "plain_s": round(p, 4),
        "with_s": round(w, 4),
        "overhead_pct": round(100.0 * (w - p) / p, 2),
        "runs": [round(r["work_s"], 4) for r in runs],
        "start_plain_s": round(sum(r["start_s"] for r in plain) / len(plain), 3),
        "start_gputime_s": round(sum(r["start_s"] for r in runs) / len(runs), 3),
        **paired_overhead(plain + runs, iters),
    }


def overhead_variants(spec: str) -> list[str]:
    """The variants of --overhead-variants ("plain,gputime" by default), "plain" first; unknown names refused."""
    names = [v for v in spec.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--overhead-variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    return ["plain", *[v for v in dict.fromkeys(names) if v != "plain"]]


# Two-sided 95 % quantiles of Student's t by degrees of freedom (1-30; 1.96 past them).
T95 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11,
       2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04)  # fmt: skip


def paired_overhead(runs: list[dict[str, Any]], iters: int) -> dict[str, Any]:
    """The library's cost from the repetitions that ran one kind both ways, back to back: each pair's
    difference in percent of its run without, their mean and its 95 % interval (Student's t), and the
    mean difference per iteration of the work in microseconds (for `tiny`, one kernel an iteration).
    Pairs cancel a drift of the machine over the campaign that pooled means keep."""
    by_rep: dict[int, dict[bool, float]] = {}
    for r in runs:
        by_rep.setdefault(int(r["rep"]), {})[bool(r["gputime"])] = float(r["work_s"])
    pairs = [(v[False], v[True]) for _, v in sorted(by_rep.items()) if False in v and True in v]
    if not pairs:
        return {}
    pct = [100.0 * (w - p) / p for p, w in pairs]
    mean = sum(pct) / len(pct)
    out: dict[str, Any] = {
        "paired_pct": [round(x, 2) for x in pct],
        "paired_mean_pct": round(mean, 2),
        "per_iter_us": round(1e6 * sum(w - p for p, w in pairs) / len(pairs) / max(iters, 1), 4),
    }
    if len(pct) > 1:
        sd = (sum((x - mean) ** 2 for x in pct) / (len(pct) - 1)) ** 0.5
        half = (T95[len(pct) - 2] if len(pct) - 1 <= len(T95) else 1.96) * sd / len(pct) ** 0.5
        out["paired_ci95_pct"] = [round(mean - half, 2), round(mean + half, 2)]
    return out


def hold_threads(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` (and those it starts later) to `cpus`; nothing where that is empty or the
    process is gone."""
    if not cpus:
        return
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def overhead_cpus(spec: str) -> set[int] | None:
    """The CPUs of --overhead-cpus ("2-5", "2,3"; "" for none) that this process may use."""
    wanted: set[int] = set()
    for part in (x for x in spec.split(",") if x.strip()):
        lo, _, hi = part.partition("-")
        wanted.update(range(int(lo), int(hi or lo) + 1))
    usable = wanted & os.sched_getaffinity(0)
    return usable or None


def gputime_reduce(
    prefix: Path, pids: list[int], t_go: float, bin_s: float = 0.1, states: Path | None = None
) -> dict[str, Any]:
    """Each process's busy intervals (the library's dump, CLOCK_REALTIME ns) reduced to what the analysis
    needs: busy seconds (their union), the number of intervals, busy seconds per `bin_s` from t_go, and
    the seconds during which two processes' intervals overlapped (no context switch record in CUDA 13.0:
    with time slicing, an interval may include the other context's slices), and each process's last
    state file as the library wrote it at exit (its kernels by id). The dumps are then removed."""
    import numpy as np

    unions: dict[int, Any] = {}
    out: dict[str, Any] = {"bin_s": bin_s, "t0": t_go, "pids": {}}
    for pid in pids:
        path = Path(f"{prefix}.{pid}")
        if not path.exists():
            out["pids"][str(pid)] = None
            continue
        raw = np.fromfile(path, dtype="<u8").reshape(-1, 3)
        path.unlink()
        starts, ends = raw[:, 1].astype(np.int64), raw[:, 2].astype(np.int64)
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
        if len(starts):
            reach = np.maximum.accumulate(ends)
            new = np.ones(len(starts), dtype=bool)
            new[1:] = starts[1:] > reach[:-1]
            idx = np.flatnonzero(new)
            u_start = starts[idx]
            u_end = reach[np.r_[idx[1:] - 1, len(starts) - 1]]  # a group ends at its running max
        else:
            u_start = u_end = np.zeros(0, dtype=np.int64)
        unions[pid] = (u_start, u_end)
        busy = int((u_end - u_start).sum())
        t0_ns = int(t_go * 1e9)
        nbins = int(max(((u_end.max() - t0_ns) / 1e9) / bin_s + 1, 1)) if len(u_end) else 0
        bins = _binned(u_start, u_end, t0_ns, int(bin_s * 1e9), nbins)
        short = (u_end - u_start) < SHORT_NS  # too short to have held another context's slice (share_bin)
        short_bins = _binned(u_start[short], u_end[short], t0_ns, int(bin_s * 1e9), nbins)
        out["pids"][str(pid)] = {
            "busy_s": busy / 1e9,
            "intervals": len(starts),
            "first": (int(u_start[0]) / 1e9) if len(u_start) else None,
            "last": (int(u_end[-1]) / 1e9) if len(u_end) else None,
            "bins_ms": [round(x / 1e6, 3) for x in bins.tolist()],
            "short_bins_ms": [round(x / 1e6, 3) for x in short_bins.tolist()],
        }
    for pid in pids:
        state = next(iter(states.glob(f"*-{pid}.json")), None) if states is not None else None
        if state is not None and out["pids"].get(str(pid)) is not None:
            with contextlib.suppress(OSError, ValueError):
                out["pids"][str(pid)]["state"] = json.loads(state.read_text())
    overlap = 0
    keys = [p for p in pids if p in unions]
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            overlap += _overlap_ns(unions[a], unions[b])
    out["overlap_s"] = overlap / 1e9
    return out


SHORT_NS = 20_000  # agent/gputime/gputime_core.h: FW_SHORT_NS


def _binned(starts: Any, ends: Any, t0_ns: int, bin_ns: int, nbins: int) -> Any:
    """Busy ns per bin of `bin_ns` from t0_ns of sorted disjoint intervals (none before t0 counted)."""
    import numpy as np

    bins = np.zeros(max(nbins, 0), dtype=np.float64)
    a_all, b_all = np.maximum(starts, t0_ns), np.maximum(ends, t0_ns)
    ka, kb = (a_all - t0_ns) // bin_ns, (np.maximum(b_all - 1, a_all) - t0_ns) // bin_ns
    same = (ka == kb) & (ka < len(bins))
    np.add.at(bins, ka[same], (b_all - a_all)[same])
    for a, b in zip(a_all[ka != kb].tolist(), b_all[ka != kb].tolist(), strict=True):  # across bin edges
        while a < b:
            k = (a - t0_ns) // bin_ns
            edge = t0_ns + (k + 1) * bin_ns
            if k < len(bins):
                bins[k] += min(b, edge) - a
            a = min(b, edge)
    return bins


def _overlap_ns(x: Any, y: Any) -> int:
    """Total length of the intersection of two sorted disjoint interval lists."""
    (xs, xe), (ys, ye) = x, y
    i = j = total = 0
    while i < len(xs) and j < len(ys):
        lo, hi = max(int(xs[i]), int(ys[j])), min(int(xe[i]), int(ye[j]))
        if hi > lo:
            total += hi - lo
        if int(xe[i]) < int(ye[j]):
            i += 1
        else:
            j += 1
    return total


def _busy_note(reduced: dict[str, Any] | None) -> str:
    if not reduced:
        return ""
    busy = [f"{v['busy_s']:.2f}" if v else "-" for v in reduced["pids"].values()]
    return f" (GPU time {'/'.join(busy)} s, overlap {reduced['overlap_s']:.2f} s)"


def plan_iters(rates: dict[str, float], target_s: float) -> tuple[dict[str, int], int]:
    """Units of work per kind for about target_s alone; the duty cycle's burst of mm units."""
    burst = max(round(rates["mm"] * DUTY_BUSY_S), 1)
    iters = {k: max(round(rates[k] * target_s), 1) for k in ("mm", "copy", "xfmr", "tiny")}
    iters["duty"] = max(round(target_s / (DUTY_BUSY_S / 0.4)), 1)
    iters["holder"] = max(round(target_s / 0.2), 1)
    return iters, burst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/fleetwatt-accuracy")
    parser.add_argument("--work", default="/tmp/fleetwatt-accuracy-work", help="scratch (the live trace)")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--target-s", type=float, default=6.0, help="seconds of each workload alone")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--calibrate-s", type=float, default=1.0)
    parser.add_argument("--monitor-hz", type=float, default=20.0)
    parser.add_argument("--util-hz", type=float, default=4.0, help="reads of the raw utilisation samples")
    parser.add_argument("--stagger-s", type=float, default=0.0, help="seconds between the starts of a mix's jobs")
    parser.add_argument(
        "--stagger-reversed",
        action="store_true",
        help="start a mix's jobs last named first (tables keep the names' order)",
    )
    parser.add_argument("--run-timeout-s", type=float, default=90.0)
    parser.add_argument("--mixes", default=",".join(MIXES), help="comma-separated names of MIXES")
    parser.add_argument("--budget-s", type=float, default=540.0, help="stop starting runs after this")
    parser.add_argument("--agent-arg", action="append", default=[], help="extra agent argument (repeat)")
    parser.add_argument("--agent-tail-s", type=float, default=12.0, help="idle at the end: the agent's window closes")
    parser.add_argument("--gputime-lib", default="", help="libfleetwatt_gputime.so: run the jobs with it")
    parser.add_argument("--overhead-reps", type=int, default=0, help="runs alone without and with the library")
    parser.add_argument("--overhead-kinds", default="mm,copy,xfmr,tiny")
    parser.add_argument("--overhead-cpus", default="2-5", help="the CPUs the overhead runs are held to ('' none)")
    parser.add_argument("--overhead-only", action="store_true", help="measure the library's cost, run no mix")
    parser.add_argument(
        "--overhead-variants",
        default="plain,gputime",
        help=f"ways each overhead run is made, of {', '.join(VARIANTS)} (plain always)",
    )
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--fake-unit-s", type=float, default=0.01)
    args = parser.parse_args()
    names = [name for name in args.mixes.split(",") if name]
    unknown = [name for name in names if name not in MIXES]
    if unknown or not names:
        parser.error(f"--mixes: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(MIXES)}")
    mixes = {name: MIXES[name] for name in names}
    c = Campaign(args)
    campaign: dict[str, Any] = {"format": "fleetwatt-accuracy-campaign", "version": 1, "args": vars(args)}
    campaign["gpu"] = c.gpu_facts()
    c.log(f"GPU: {campaign['gpu']}")
    monitor = threading.Thread(target=c.monitor, daemon=True)
    monitor.start()
    sampler = threading.Thread(target=c.util_sampler, daemon=True)
    sampler.start()
    runs: list[dict[str, Any]] = []
    idles: list[dict[str, Any]] = []
    ok = True
    cal_run: dict[str, Any] | None = None
    try:
        c.start_agent()
        idles.append({"rep": 0, **c.idle_window(args.idle_s)})
        cal = c.spawn("calibrate", 1)
        cal_run = c.run_group("calibrate", 0, [cal])
        report = cal_run["jobs"][0]["report"]
        if cal_run["status"] != "ok" or not report:
            raise SystemExit(f"calibration failed ({cal_run['status']}): see {c.out / 'run.log'}")
        rates = report["rates"]
        iters, burst = plan_iters(rates, args.target_s)
        campaign.update({"rates": rates, "iters": iters, "duty_burst": burst})
        c.log(f"rates {rates} -> iters {iters}, duty burst {burst}")
        if args.overhead_reps and args.gputime_lib:
            campaign["overhead"] = overhead(c, [k for k in args.overhead_kinds.split(",") if k], iters, burst)
        needed = {k for kinds in mixes.values() for k in kinds}  # each kind a mix uses, alone first
        groups: list[tuple[str, tuple[str, ...]]] = [(f"alone:{k}", (k,)) for k in ALONE if k in needed]
        groups += [(f"mix:{name}", kinds) for name, kinds in mixes.items()]
        reps = 0 if args.overhead_only else args.reps
        plan = [(rep, label, kinds) for rep in range(1, reps + 1) for label, kinds in groups]
        next_children = [c.spawn(k, iters[k], burst) for k in plan[0][2]] if plan else []
        for i, (rep, label, _kinds) in enumerate(plan):
            if label == groups[0][0]:
                idles.append({"rep": rep, **c.idle_window(args.idle_s / 2)})
            children = next_children
            over = time.time() - c.t0 > args.budget_s
            if i + 1 < len(plan) and not over:
                next_children = [c.spawn(k, iters[k], burst) for k in plan[i + 1][2]]
            result = c.run_group(label, rep, children)
            runs.append(result)
            ok = ok and result["status"] == "ok"
            if over:
                c.log(f"budget of {args.budget_s:.0f} s spent: stopping after {label} rep {rep}")
                ok = False
                break
        idles.append({"rep": -1, **c.idle_window(3.0)})
        time.sleep(args.agent_tail_s)  # the agent's energy window closes
    finally:
        c.stop_agent()
        c.stop_monitor.set()
        monitor.join(timeout=5)
        sampler.join(timeout=5)
        for child in c.children.values():
            if child.proc.poll() is None:
                child.proc.kill()
    campaign.update(
        {
            "runs": runs,
            "idle_windows": idles,
            "calibration_run": cal_run,
            "monitor": accuracy_analysis.columns(c.monitor_rows),
            "util_samples": sorted([pid, ts, *rest] for (pid, ts), rest in c.util_samples.items()),
        }
    )
    with gzip.open(c.out / "campaign.json.gz", "wt", encoding="utf-8") as f:
        json.dump(campaign, f, separators=(",", ":"))
    trace = c.work / "trace.jsonl"
    if trace.exists():
        with open(trace, "rb") as src, gzip.open(c.out / "trace.jsonl.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
    try:
        results = accuracy_analysis.analyse(c.out / "campaign.json.gz", c.out / "trace.jsonl.gz")
        (c.out / "results.json").write_text(json.dumps(results, indent=1))
        print(accuracy_analysis.table(results), flush=True)
    except Exception as exc:
        c.log(f"analysis failed: {exc!r}")
        import traceback

        traceback.print_exc()
    c.log("done" if ok else "done, with runs that did not finish")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
