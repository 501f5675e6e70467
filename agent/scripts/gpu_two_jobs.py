"""The two-jobs experiment (docs/agent-h200.md) on a real GPU, checked from the agent's own /jobs and /metrics.

Runs the agent from the source tree (PYTHONPATH=agent) with --backend nvml --record, starts `heavy`,
then `light`, on GPU 0, keeps both running together for --together seconds (>= 60), stops light, then
heavy, lets the agent's energy window close, and checks:
  heavy >= 98 % of the two jobs' energy; light <= 2 %; light holds >= 10 GiB; method sm_time in every
  sample in which both were present; coverage >= 0.95 for both; jobs + idle = GPU energy on every
  sample (trace) and at every scrape (/metrics); the agent's GPU energy within 1 % of the driver's
  own counter delta over the same span.
A second agent runs beside the first with --energy-interval 0 (the counter read every tick), so the
same run measures the CPU per tick of both designs on the real driver. Also measured: the CPU and
wall time of each NVML call the agent makes, and the agents' resident memory.

Writes report.json, trace.jsonl (the main agent's recording), trace_naive.jsonl, metrics_after.prom
and run.log into --out. Exit status 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AGENT_SRC = HERE.parent
sys.path.insert(0, str(AGENT_SRC))

from fleetwatt_agent.backends.replay import read_trace  # noqa: E402
from fleetwatt_agent.discovery import ProcResolver, parse_cgroup  # noqa: E402

GIB = 2**30


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log_file = open(self.out / "run.log", "a", buffering=1)  # noqa: SIM115
        self.procs: list[subprocess.Popen[bytes]] = []
        self.control = self.out / "fake_nvml_state.json" if args.dry_run else None
        self.fake_state: dict[str, Any] = {"gpus": [{"power_w": 80.0, "procs": {}, "history": []}]}
        self.t0 = time.time()

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_file.write(line + "\n")

    # -- the fake GPU of the dry run ----------------------------------------------------------------
    def fake_set(self, power_w: float | None = None, procs: dict[int, dict[str, int]] | None = None) -> None:
        if self.control is None:
            return
        gpu = self.fake_state["gpus"][0]
        if power_w is not None:
            gpu["power_w"] = power_w
            gpu["history"].append([time.time(), power_w])
        if procs is not None:
            gpu["procs"] = {str(k): v for k, v in procs.items()}
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.fake_state))
        tmp.replace(self.control)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(AGENT_SRC)]
        if self.args.dry_run:
            paths.insert(0, str(AGENT_SRC.parent / "tests" / "agent" / "fake_nvml"))
            env["FAKE_NVML_STATE"] = str(self.control)
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    # -- processes ----------------------------------------------------------------------------------
    def start_agent(self, name: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
        cmd = agent_command("h200-two-jobs", extra)
        self.log(f"start agent {name}: {' '.join(cmd[1:])}")
        proc = subprocess.Popen(cmd, env=self.env(), stdout=subprocess.PIPE, stderr=self.log_file)
        self.procs.append(proc)
        base = agent_url(proc, name)
        self.log(f"agent {name} ready at {base} (pid {proc.pid})")
        return proc, base

    def start_workload(self, mode: str, job_env: dict[str, str]) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, str(HERE / "two_jobs_workload.py"), mode]
        if self.args.dry_run:
            cmd.append("--fake")
        env = {**self.env(), **job_env}
        proc = subprocess.Popen(cmd, env=env, stdout=self.log_file, stderr=self.log_file)
        self.procs.append(proc)
        self.log(f"started {mode} (pid {proc.pid}) {job_env or ''}")
        return proc

    def stop(self, proc: subprocess.Popen[bytes], name: str) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log(f"stopped {name} (rc {proc.returncode})")

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()


def agent_command(hostname: str, extra: list[str]) -> list[str]:
    """The agent from the source tree on the NVML backend, on a free loopback port."""
    agent = [sys.executable, "-m", "fleetwatt_agent", "--backend", "nvml", "--listen", "127.0.0.1:0"]
    return [*agent, "--hostname", hostname, "--log-level", "WARNING", *extra]


def agent_url(proc: subprocess.Popen[bytes], name: str) -> str:
    """The URL a started agent prints on its first line, once its /healthz answers 200."""
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        raise SystemExit(f"agent {name} did not start: {line!r} (rc {proc.poll()})")
    base = m.group(1)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                if r.status == 200:
                    return base
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"agent {name} never became healthy")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return bytes(r.read())


def get_json(url: str) -> dict[str, Any]:
    return dict(json.loads(get(url)))


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_mem_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:", "RssShmem:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return out


RSS_PROBE = """
import sys
if sys.argv[1] != "bare":
    import pynvml
    pynvml.nvmlInit()
if sys.argv[1] == "agent":
    import fleetwatt_agent.cli, fleetwatt_agent.backends.nvml, prometheus_client  # noqa
for line in open("/proc/self/status"):
    if line.startswith(("VmRSS:", "RssAnon:", "RssFile:")):
        print(line.split()[0].rstrip(":"), line.split()[1])
"""


def rss_floor(run: Run) -> dict[str, dict[str, int]]:
    """Resident memory of a bare interpreter, of one that initialised NVML, and of one that also imported
    the agent: what the agent's own code adds over the driver library's floor."""
    out = {}
    for what in ("bare", "nvml", "agent"):
        text = subprocess.run(
            [sys.executable, "-c", RSS_PROBE, what], env=run.env(), capture_output=True, text=True, timeout=60
        ).stdout
        out[what] = {k: int(v) for k, v in (line.split() for line in text.splitlines() if line.strip())}
    return out


def metrics_sums(text: str, gpu: str = "0") -> dict[str, float]:
    """GPU energy, idle energy and the sum of job energies on one GPU, from a /metrics scrape."""
    sums = {"gpu": 0.0, "idle": 0.0, "jobs": 0.0}
    for line in text.splitlines():
        if line.startswith("#") or f'gpu="{gpu}"' not in line:
            continue
        name, value = line.split("{", 1)[0], float(line.rsplit(" ", 1)[1])
        if name == "fleetwatt_gpu_energy_joules_total":
            sums["gpu"] += value
        elif name == "fleetwatt_gpu_idle_energy_joules_total":
            sums["idle"] += value
        elif name == "fleetwatt_job_energy_joules_total":
            sums["jobs"] += value
    return sums


def job_on_gpu(doc: dict[str, Any], key: str, gpu: str = "0") -> dict[str, Any] | None:
    for job in doc["jobs"]:
        if job["job_key"] == key:
            for g in job["gpus"]:
                if g["gpu"] == gpu:
                    return dict(g)
    return None


def gpu_doc(doc: dict[str, Any], gpu: str = "0") -> dict[str, Any]:
    return next(g for g in doc["gpus"] if g["gpu"] == gpu)


def wait_for(pred: Any, timeout: float, what: str) -> float:
    start = time.time()
    while time.time() - start < timeout:
        if pred():
            return time.time()
        time.sleep(0.25)
    raise SystemExit(f"timed out waiting for {what}")


def nvml_costs(nvml: Any, handle: Any, n: int) -> dict[str, dict[str, float]]:
    """CPU and wall time of each NVML call the agent makes (mean CPU ms, wall p50/p99 ms)."""
    calls = {
        "nvmlDeviceGetTotalEnergyConsumption": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        "nvmlDeviceGetPowerUsage": lambda: nvml.nvmlDeviceGetPowerUsage(handle),
        "nvmlDeviceGetMemoryInfo": lambda: nvml.nvmlDeviceGetMemoryInfo(handle),
        "nvmlDeviceGetComputeRunningProcesses": lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle),
        "nvmlDeviceGetGraphicsRunningProcesses": lambda: nvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
        "nvmlDeviceGetProcessUtilization": lambda: _util(nvml, handle),
    }
    out = {}
    for name, fn in calls.items():
        walls, cpus = [], []
        for _ in range(n):
            c0, w0 = time.process_time(), time.perf_counter()
            with contextlib.suppress(nvml.NVMLError):
                fn()
            cpus.append(time.process_time() - c0)
            walls.append(time.perf_counter() - w0)
        walls.sort()
        out[name] = {
            "cpu_ms_mean": 1000 * statistics.fmean(cpus),
            "wall_ms_p50": 1000 * walls[len(walls) // 2],
            "wall_ms_p99": 1000 * walls[min(len(walls) - 1, int(0.99 * len(walls)))],
        }
    return out


def _util(nvml: Any, handle: Any) -> Any:
    return nvml.nvmlDeviceGetProcessUtilization(handle, int((time.time() - 1.0) * 1e6))


def trace_checks(path: Path, heavy: str, light: str, gpu: int = 0) -> dict[str, Any]:
    """From the recording: the invariant on every sample, the method while both ran, time together."""
    head, ticks = read_trace(path)
    worst = 0.0
    samples = 0
    both_s = 0.0
    both_samples = 0
    methods_both: dict[str, int] = {}
    carried = 0
    committed = 0.0
    for rec in ticks:
        for out in rec.get("split", []):
            if out["index"] != gpu:
                continue
            if "commit" in out:
                committed += out["commit"]["total_j"]
            if out.get("gap") or "sample_j" not in out:
                continue
            samples += 1
            parts = sum(j for _, j in out["jobs"].values()) + out["idle_j"]
            worst = max(worst, abs(parts - out["sample_j"]) / max(out["sample_j"], 1.0))
            if heavy in out["jobs"] and light in out["jobs"]:
                both_samples += 1
                both_s += out["dt_s"]
                for key in (heavy, light):
                    m = out["jobs"][key][0]
                    methods_both[m] = methods_both.get(m, 0) + 1
        for g in rec["gpus"]:
            if g["index"] == gpu and g.get("activity_missing") and len(g["processes"]) > 1:
                carried += 1
    return {
        "samples": samples,
        "invariant_worst_relative_residual": worst,
        "samples_both_present": both_samples,
        "seconds_both_present": both_s,
        "methods_while_both_present": methods_both,
        "ticks_without_utilisation_samples_while_both_present": carried,
        "committed_energy_j": committed,
        "energy_interval_s": head.get("energy_interval_s"),
        "driver": head.get("driver"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/fleetwatt-gpu-two-jobs")
    parser.add_argument("--together", type=float, default=70.0, help="seconds both programs run together")
    parser.add_argument("--min-together", type=float, default=60.0)
    parser.add_argument("--energy-interval", type=float, default=10.0, help="the main agent's")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: fake NVML and sleeping programs")
    parser.add_argument("--nvml-calls", type=int, default=40, help="repetitions per NVML call measured")
    args = parser.parse_args()
    run = Run(args)
    try:
        return experiment(run)
    finally:
        run.cleanup()


def experiment(run: Run) -> int:
    args = run.args
    out = run.out
    if args.dry_run:
        run.fake_set(power_w=80.0, procs={})
        sys.path.insert(0, str(AGENT_SRC.parent / "tests" / "agent" / "fake_nvml"))
        os.environ["FAKE_NVML_STATE"] = str(run.control)
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    device = {
        "name": _s(pynvml.nvmlDeviceGetName(handle)),
        "uuid": _s(pynvml.nvmlDeviceGetUUID(handle)),
        "driver": _s(pynvml.nvmlSystemGetDriverVersion()),
        "accounting_mode": _try(lambda: pynvml.nvmlDeviceGetAccountingMode(handle)),
        "mig_mode": _try(lambda: list(pynvml.nvmlDeviceGetMigMode(handle))),
        "power_limit_mw": _try(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle)),
        "dry_run": bool(args.dry_run),
    }
    run.log(f"device: {device}")

    # Separate jobs need separate identities. In a container every process shares one cgroup (one
    # `container/<id>` job), so there the two programs are tagged as Slurm jobs through SLURM_JOB_ID,
    # the agent's own fallback for Slurm without cgroups.
    own = parse_cgroup(Path("/proc/self/cgroup").read_text() if Path("/proc/self/cgroup").exists() else "")
    tag = bool(own.slurm_job or own.slurm_sluid or own.pod_uid or own.container_id)
    heavy_env = {"SLURM_JOB_ID": "9001", "SLURM_JOB_NAME": "heavy"} if tag else {}
    light_env = {"SLURM_JOB_ID": "9002", "SLURM_JOB_NAME": "light"} if tag else {}
    run.log(f"own cgroup identity {own}; tagging as Slurm jobs: {tag}")

    costs_idle = nvml_costs(pynvml, handle, args.nvml_calls)
    floors = rss_floor(run)
    run.log(f"resident memory floors (KiB): {floors}")
    agent_a, url_a = run.start_agent(
        "main", ["--record", str(out / "trace.jsonl"), "--energy-interval", str(args.energy_interval)]
    )
    agent_b, url_b = run.start_agent("naive", ["--record", str(out / "trace_naive.jsonl"), "--energy-interval", "0"])
    time.sleep(3.0)

    resolver = ProcResolver()
    scrapes: dict[str, Any] = {}

    def bracket(name: str) -> None:
        """Scrape both agents between two reads of the driver's counter (their mean is the reference)."""
        e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        doc_a, doc_b = get_json(url_a + "/jobs"), get_json(url_b + "/jobs")
        met_a, met_b = get(url_a + "/metrics").decode(), get(url_b + "/metrics").decode()
        e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        scrapes[name] = {
            "time": time.time(),
            "counter_mj": (e0 + e1) / 2,
            "counter_spread_mj": e1 - e0,
            "jobs_main": doc_a,
            "jobs_naive": doc_b,
            "metrics_main_sums": metrics_sums(met_a),
            "metrics_naive_sums": metrics_sums(met_b),
            "cpu_s": {"main": proc_cpu_s(agent_a.pid), "naive": proc_cpu_s(agent_b.pid)},
            "tick_cpu_s": {"main": doc_a["tick_cpu_seconds_total"], "naive": doc_b["tick_cpu_seconds_total"]},
            "mem_kib": {"main": proc_mem_kib(agent_a.pid), "naive": proc_mem_kib(agent_b.pid)},
        }
        if name == "after":
            (out / "metrics_after.prom").write_text(met_a)

    bracket("start")
    heavy = run.start_workload("heavy", heavy_env)
    run.fake_set(power_w=690.0, procs={heavy.pid: {"mem": 1_050_000_000, "sm": 99}})
    heavy_key = ""

    def heavy_seen() -> bool:
        nonlocal heavy_key
        heavy_key = heavy_key or resolver.resolve(heavy.pid).job_key
        g = job_on_gpu(get_json(url_a + "/jobs"), heavy_key)
        return bool(g and g["present"])

    wait_for(heavy_seen, 120, "heavy on GPU 0")
    run.log(f"heavy is {heavy_key}")
    time.sleep(2.0)
    light = run.start_workload("light", light_env)
    run.fake_set(procs={heavy.pid: {"mem": 1_050_000_000, "sm": 99}, light.pid: {"mem": 11_406_409_728, "sm": 1}})
    light_key = ""

    def light_seen() -> bool:
        nonlocal light_key
        light_key = light_key or resolver.resolve(light.pid).job_key
        g = job_on_gpu(get_json(url_a + "/jobs"), light_key)
        return bool(g and g["present"] and g["memory_bytes"] >= 10 * GIB)

    together_from = wait_for(light_seen, 120, "light on GPU 0 holding 10 GiB")
    run.log(f"light is {light_key}; both on GPU 0, running together for {args.together:.0f} s")
    costs_busy = None
    time.sleep(args.together / 2)
    bracket("during")
    costs_busy = nvml_costs(pynvml, handle, max(args.nvml_calls // 2, 5))
    time.sleep(max(args.together - (time.time() - together_from), 0.0))
    run.stop(light, "light")
    run.fake_set(procs={heavy.pid: {"mem": 1_050_000_000, "sm": 99}})
    together_to = time.time()
    time.sleep(2.0)
    run.stop(heavy, "heavy")
    run.fake_set(power_w=80.0, procs={})
    # Let the main agent's energy window close (and the GPU settle) before the final scrape.
    time.sleep(max(args.energy_interval, 1.0) + 4.0)
    bracket("after")
    for proc, name in ((agent_a, "main"), (agent_b, "naive")):
        run.stop(proc, f"agent {name}")

    report = evaluate(run, device, scrapes, heavy_key, light_key, together_to - together_from)
    report["nvml_call_costs"] = {"idle": costs_idle, "both_jobs_running": costs_busy}
    report["agent_cost"]["rss_floor_kib"] = floors
    (out / "report.json").write_text(json.dumps(report, indent=1))
    if run.control is not None:
        run.control.unlink(missing_ok=True)
        run.control.with_suffix(".tmp").unlink(missing_ok=True)
    summary(run, report)
    return 0 if report["passed"] else 1


def evaluate(
    run: Run, device: dict[str, Any], scrapes: dict[str, Any], heavy: str, light: str, together_s: float
) -> dict[str, Any]:
    args = run.args
    after, during, start = scrapes["after"], scrapes["during"], scrapes["start"]
    h = job_on_gpu(after["jobs_main"], heavy) or {}
    li = job_on_gpu(after["jobs_main"], light) or {}
    li_during = job_on_gpu(during["jobs_main"], light) or {}
    e_h, e_l = h.get("energy_j", 0.0), li.get("energy_j", 0.0)
    both = e_h + e_l
    trace = trace_checks(run.out / "trace.jsonl", heavy, light)
    trace_naive = trace_checks(run.out / "trace_naive.jsonl", heavy, light)
    counter_j = (after["counter_mj"] - start["counter_mj"]) / 1000.0

    def agent_energy(scrape: dict[str, Any], which: str) -> float:
        g = gpu_doc(scrape[f"jobs_{which}"])
        return float(g["energy_j"] + (g.get("pending_energy_j") or 0.0))

    agent_j = agent_energy(after, "main") - agent_energy(start, "main")
    naive_j = agent_energy(after, "naive") - agent_energy(start, "naive")
    scrape_invariant = max(
        abs(s[k]["jobs"] + s[k]["idle"] - s[k]["gpu"]) / max(s[k]["gpu"], 1.0)
        for s in scrapes.values()
        for k in ("metrics_main_sums", "metrics_naive_sums")
    )
    ticks = {w: after[f"jobs_{w}"]["samples_total"] - start[f"jobs_{w}"]["samples_total"] for w in ("main", "naive")}
    cpu = {w: after["cpu_s"][w] - start["cpu_s"][w] for w in ("main", "naive")}
    cpu_per_tick_ms = {w: 1000 * cpu[w] / ticks[w] if ticks[w] else None for w in cpu}
    # The sampler thread's own CPU in its ticks (thread_time, ns resolution), driver calls included,
    # scrapes excluded: over the whole run, and over the second half (both jobs, then none).
    tick_ms = {
        w: 1000 * (after["tick_cpu_s"][w] - start["tick_cpu_s"][w]) / ticks[w] if ticks[w] else None for w in cpu
    }
    ticks_late = {w: after[f"jobs_{w}"]["samples_total"] - during[f"jobs_{w}"]["samples_total"] for w in cpu}
    tick_ms_late = {
        w: 1000 * (after["tick_cpu_s"][w] - during["tick_cpu_s"][w]) / ticks_late[w] if ticks_late[w] else None
        for w in cpu
    }
    methods = trace["methods_while_both_present"]
    checks = {
        "together_s": (together_s, ">=", args.min_together),
        "seconds_both_present_in_trace": (trace["seconds_both_present"], ">=", args.min_together),
        "heavy_share": (e_h / both if both else 0.0, ">=", 0.98),
        "light_share": (e_l / both if both else 1.0, "<=", 0.02),
        "light_memory_gib": (li_during.get("memory_bytes", 0) / GIB, ">=", 10.0),
        "samples_both_present_not_sm_time": (sum(n for m, n in methods.items() if m != "sm_time"), "==", 0),
        "light_attribution_is_sm_time": (float(li.get("attribution") == "sm_time"), "==", 1.0),
        "heavy_coverage": (h.get("coverage", 0.0), ">=", 0.95),
        "light_coverage": (li.get("coverage", 0.0), ">=", 0.95),
        "invariant_every_sample_worst_relative": (trace["invariant_worst_relative_residual"], "<=", 1e-9),
        "invariant_naive_every_sample_worst_relative": (trace_naive["invariant_worst_relative_residual"], "<=", 1e-9),
        "invariant_every_scrape_worst_relative": (scrape_invariant, "<=", 1e-9),
        "agent_vs_counter_relative": (abs(agent_j - counter_j) / counter_j if counter_j else 1.0, "<=", 0.01),
        "naive_agent_vs_counter_relative": (abs(naive_j - counter_j) / counter_j if counter_j else 1.0, "<=", 0.01),
    }
    ops = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b}
    results = {
        name: {"value": value, "op": op, "threshold": thr, "pass": bool(ops[op](value, thr))}
        for name, (value, op, thr) in checks.items()
    }
    mem = after["mem_kib"]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": device,
        "heavy_job_key": heavy,
        "light_job_key": light,
        "energy_j": {
            "heavy": e_h,
            "light": e_l,
            "agent_gpu": agent_j,
            "agent_gpu_naive": naive_j,
            "nvml_counter": counter_j,
        },
        "heavy": h,
        "light": li,
        "light_during": li_during,
        "trace": trace,
        "trace_naive": trace_naive,
        "agent_cost": {
            "ticks": ticks,
            "cpu_s": cpu,
            "cpu_ms_per_tick": cpu_per_tick_ms,
            "tick_cpu_ms_per_tick": tick_ms,
            "tick_cpu_ms_per_tick_second_half": tick_ms_late,
            "percent_of_one_core_per_gpu": {
                w: (v / 10.0 / len(after[f"jobs_{w}"]["gpus"])) if v is not None else None
                for w, v in cpu_per_tick_ms.items()
            },
            "rss_kib": {w: mem[w].get("VmRSS") for w in mem},
            "rss_detail_kib": mem,
            "peak_rss_kib": {w: mem[w].get("VmHWM") for w in mem},
            "energy_interval_s": {"main": args.energy_interval, "naive": 0},
        },
        "scrapes": {k: {kk: vv for kk, vv in v.items() if kk not in ("jobs_naive",)} for k, v in scrapes.items()},
        "checks": results,
        "passed": all(r["pass"] for r in results.values()),
    }


def summary(run: Run, report: dict[str, Any]) -> None:
    e = report["energy_j"]
    run.log(
        f"energy J: heavy {e['heavy']:.0f}  light {e['light']:.0f}  agent GPU {e['agent_gpu']:.0f}  "
        f"naive {e['agent_gpu_naive']:.0f}  NVML counter {e['nvml_counter']:.0f}"
    )
    c = report["agent_cost"]
    run.log(f"agent CPU ms/tick (process) {c['cpu_ms_per_tick']}  (sampler thread) {c['tick_cpu_ms_per_tick']}")
    run.log(f"agent RSS KiB {c['rss_detail_kib']}  floors {c.get('rss_floor_kib')}")
    for name, r in report["checks"].items():
        run.log(f"{'PASS' if r['pass'] else 'FAIL'}  {name}: {r['value']:.6g} {r['op']} {r['threshold']}")
    run.log("ALL CHECKS PASSED" if report["passed"] else "SOME CHECKS FAILED")


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _try(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # a fact we could not read is reported, not fatal
        return f"error: {exc}"


if __name__ == "__main__":
    sys.exit(main())
