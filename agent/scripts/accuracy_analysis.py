"""The accuracy campaign's arithmetic (docs/accuracy.md): the true shares of each mix, the agent's.

Pure functions over what accuracy_campaign.py measured (campaign.json.gz) and what the agent recorded
(trace.jsonl.gz); the tests run them on the traces kept in tests/agent/fixtures/accuracy/.
`python agent/scripts/accuracy_analysis.py FOLDER...` replays each kept run through the agent as it is now
and writes the tables to FOLDER/replay.json beside the campaign's results.json (what the agent computed
live, kept as measured): where the agent changed since a run, the two differ.

The truth of a shared run, for jobs of fixed work:
  - idle power P0: the driver's energy counter over a window with nothing on the GPU, per repetition;
  - a kind's dynamic energy alone D = E_alone - P0 x T_alone (its own run, the time its process was
    listed by the driver);
  - the shared run (E over the time any of its processes was listed, T): the idle energy P0 x T is split
    by occupancy (each second's among the jobs present in it, equally), the rest E - P0 x T in
    proportion to the jobs' D.
The agent's shares: its energy per job over the whole campaign, replayed from its recording with each
split method, each job's over the jobs of the run. `sm_time` and `sm_mem` are replayed as an agent
without exact GPU time would have split; `gpu_time` (a trace whose processes carry the injection
library's counters) as the agent splits by default when they do.
Beside them, two time shares of each mix: NVML's (each process's SM time over the run, as the driver's
samples gave it) and CUPTI's (each process's exact GPU time over the run, from the library's intervals).
"""

from __future__ import annotations

import bisect
import functools
import gzip
import itertools
import json
import math
import statistics
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetwatt_agent.split import SPLITS, SplitChoice


def columns(rows: Sequence[tuple[float, int, int, int, int, tuple[int, ...]]]) -> dict[str, list[Any]]:
    """The monitor's rows as columns (compact JSON)."""
    return {
        "t": [round(r[0], 4) for r in rows],
        "energy_mj": [r[1] for r in rows],
        "power_mw": [r[2] for r in rows],
        "temp_c": [r[3] for r in rows],
        "sm_clock_mhz": [r[4] for r in rows],
        "pids": [list(r[5]) for r in rows],
    }


@dataclass(frozen=True)
class Monitor:
    """The driver's energy counter and process list as the campaign read them (valid rows only)."""

    t: tuple[float, ...]
    energy_j: tuple[float, ...]
    pids: tuple[frozenset[int], ...]

    @classmethod
    def from_columns(cls, cols: dict[str, list[Any]]) -> Monitor:
        rows = [
            (t, e / 1000.0, frozenset(p))
            for t, e, p in zip(cols["t"], cols["energy_mj"], cols["pids"], strict=True)
            if e >= 0
        ]
        return cls(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows))

    def energy_at(self, t: float) -> float:
        """The counter at time t, linear between the two readings around it."""
        i = bisect.bisect_left(self.t, t)
        if i <= 0:
            return self.energy_j[0]
        if i >= len(self.t):
            return self.energy_j[-1]
        t0, t1 = self.t[i - 1], self.t[i]
        e0, e1 = self.energy_j[i - 1], self.energy_j[i]
        return e0 + (e1 - e0) * (t - t0) / (t1 - t0) if t1 > t0 else e1

    def energy_between(self, t0: float, t1: float) -> float:
        return self.energy_at(t1) - self.energy_at(t0)

    def presence(self, pid: int, after: float, before: float) -> tuple[float, float] | None:
        """First and last reading, within (after, before + slack), that listed `pid`."""
        times = [t for t, p in zip(self.t, self.pids, strict=True) if after <= t <= before and pid in p]
        return (times[0], times[-1]) if times else None

    def occupancy(self, pids: Iterable[int], t0: float, t1: float) -> dict[int, float]:
        """Each pid's occupancy seconds in [t0, t1]: every interval between readings split equally among
        the pids listed at its start; intervals with none of them listed, equally among all."""
        pids = list(pids)
        occ = dict.fromkeys(pids, 0.0)
        idx = [i for i, t in enumerate(self.t) if t0 <= t <= t1]
        for a, b in itertools.pairwise(idx):
            dt = self.t[b] - self.t[a]
            present = [p for p in pids if p in self.pids[a]] or pids
            for p in present:
                occ[p] += dt / len(present)
        return occ


def idle_power_w(mon: Monitor, window: dict[str, Any]) -> float:
    t0, t1 = float(window["t0"]), float(window["t1"])
    return mon.energy_between(t0, t1) / (t1 - t0)


@dataclass(frozen=True)
class RunEnergy:
    label: str
    rep: int
    kinds: tuple[str, ...]
    pids: tuple[int, ...]
    t0: float  # first reading listing any of its processes
    t1: float  # last
    energy_j: float
    occupancy_s: dict[int, float]

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0


def run_energy(mon: Monitor, run: dict[str, Any]) -> RunEnergy | None:
    """A run's energy over the time its processes were on the GPU; None when they never were."""
    pids = tuple(int(j["pid"]) for j in run["jobs"])
    spans = [mon.presence(p, float(run["t_go"]) - 1.0, float(run["t_done"]) + 1.0) for p in pids]
    if run.get("status") != "ok" or any(s is None for s in spans):
        return None
    t0 = min(s[0] for s in spans if s is not None)
    t1 = max(s[1] for s in spans if s is not None)
    return RunEnergy(
        label=str(run["label"]),
        rep=int(run["rep"]),
        kinds=tuple(str(j["kind"]) for j in run["jobs"]),
        pids=pids,
        t0=t0,
        t1=t1,
        energy_j=mon.energy_between(t0, t1),
        occupancy_s=mon.occupancy(pids, t0, t1),
    )


def true_shares(run: RunEnergy, idle_w: float, dynamic_j: dict[str, float]) -> dict[int, float]:
    """Each pid's true share (0..1) of the run's energy: idle by occupancy, the rest by dynamic alone."""
    idle_j = min(max(idle_w * run.seconds, 0.0), run.energy_j)
    occ_total = math.fsum(run.occupancy_s.values()) or 1.0
    dyn = {p: max(dynamic_j[k], 0.0) for p, k in zip(run.pids, run.kinds, strict=True)}
    dyn_total = math.fsum(dyn.values())
    parts = {
        p: idle_j * run.occupancy_s[p] / occ_total
        + (run.energy_j - idle_j) * (dyn[p] / dyn_total if dyn_total > 0 else 1.0 / len(run.pids))
        for p in run.pids
    }
    total = math.fsum(parts.values())
    return {p: v / total for p, v in parts.items()}


GPU_TIME = "gpu_time"  # a method of the tables: the replay with the processes' exact GPU time
# The same with each process's union counter where the trace also kept it (the counter the agent uses with
# a library that keeps no bins, where nothing two processes claim together is shared): to tell the two apart.
GPU_TIME_UNION = "gpu_time_union"


def replay(trace: Path, split: str, sink: Any = None) -> Any:
    """Run the agent's sampler over a recording (gzip or plain) with `split`; the sampler at the end.

    `split` is one of SPLITS (exact GPU time ignored) or GPU_TIME (the default split, exact GPU time used).
    `sink` receives every tick as the recorder does (write_tick), e.g. to check the invariant."""
    from fleetwatt_agent.backends.replay import ReplayBackend
    from fleetwatt_agent.errors import ReplayFinished
    from fleetwatt_agent.sampler import Sampler, SamplerSettings

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        opener = gzip.open if str(trace).endswith(".gz") else open
        with opener(trace, "rb") as src:
            raw = src.read()
        path.write_bytes(_union_counters(raw) if split == GPU_TIME_UNION else raw)
        backend = ReplayBackend(path, speed=0, keep_time=True)
        info = backend.open()
        head = backend.header
        settings = SamplerSettings(
            hostname="replay",
            interval_s=float(head.get("interval_s", 1.0)),
            energy_interval_s=float(head.get("energy_interval_s", 10.0)),
            linger_s=1e12,  # keep every job's counters to the end
            split=_split(split) if split not in (GPU_TIME, GPU_TIME_UNION) else "sm_time",
            gpu_time=split in (GPU_TIME, GPU_TIME_UNION),
        )
        sampler = Sampler(backend, info, backend.resolver(), settings, sink=sink)
        try:
            while True:
                try:
                    sampler.tick()
                except ReplayFinished:
                    break
        finally:
            backend.close()
    return sampler


def _union_counters(trace: bytes) -> bytes:
    """The trace with each process's GPU-time counter replaced by its union counter where it kept one."""
    lines = trace.decode().splitlines()
    out = lines[:1]
    for line in lines[1:]:
        if not line.strip():
            continue
        tick = json.loads(line)
        for g in tick["gpus"]:
            for p in g["processes"]:
                if len(p) > 6:
                    p[4] = p[6]
        out.append(json.dumps(tick, separators=(",", ":")))
    return ("\n".join(out) + "\n").encode()


def _split(name: str) -> SplitChoice:
    for choice in SPLITS:
        if choice == name:
            return choice
    raise ValueError(f"unknown split {name!r}: one of {', '.join(SPLITS)}")


def agent_energy(trace: Path, split: str) -> dict[str, float]:
    """Joules per job key as the agent splits the recording with `split` (committed, whole trace)."""
    sampler = replay(trace, split)
    totals: dict[str, float] = {}
    for led in sampler.gpus.values():
        for key, job in led.jobs.items():
            totals[key] = totals.get(key, 0.0) + job.energy_total_j()
    return totals


def _pid_of(job_key: str) -> int | None:
    """proc/<pid>-<start> -> pid (the campaign's processes are plain processes)."""
    if not job_key.startswith("proc/"):
        return None
    head = job_key[5:].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def agent_shares(energy: dict[str, float], pids: Sequence[int]) -> dict[int, float] | None:
    by_pid: dict[int, float] = {}
    for key, joules in energy.items():
        pid = _pid_of(key)
        if pid is not None and pid in pids:
            by_pid[pid] = by_pid.get(pid, 0.0) + joules
    total = math.fsum(by_pid.values())
    if total <= 0 or set(by_pid) != set(pids):
        return None
    return {p: by_pid[p] / total for p in pids}


@functools.lru_cache(maxsize=4)
def trace_ticks(trace: Path) -> tuple[dict[str, Any], ...]:
    """The recording's ticks, read once however many mixes ask."""
    opener = gzip.open if str(trace).endswith(".gz") else open
    with opener(trace, "rt", encoding="utf-8") as f:
        f.readline()
        return tuple(json.loads(line) for line in f if line.strip())


def has_gpu_time(trace: Path) -> bool:
    """Whether any process of the recording carries a GPU-time counter."""
    return any(len(p) > 4 for tick in trace_ticks(trace) for g in tick["gpus"] for p in g["processes"])


def nvml_time(trace: Path, pids: Sequence[int], t0: float, t1: float) -> dict[int, float] | None:
    """Each pid's share of the SM time NVML gave the run's processes within [t0, t1] (the driver's
    per-process samples as the agent read them, x each tick's length)."""
    sm = dict.fromkeys(pids, 0.0)
    last: float | None = None
    for tick in trace_ticks(trace):
        mono, t = float(tick["mono"]), float(tick["t"])
        dt = mono - last if last is not None else 0.0
        last = mono
        if not t0 <= t <= t1 + 1.0:
            continue
        for g in tick["gpus"]:
            for p in g["processes"]:
                if int(p[0]) in sm and p[2] is not None:
                    sm[int(p[0])] += float(p[2]) * dt
    total = math.fsum(sm.values())
    return {p: v / total for p, v in sm.items()} if total > 0 else None


def cupti_time(run: dict[str, Any], pids: Sequence[int]) -> dict[int, float] | None:
    """Each pid's share of the exact GPU time of the run's processes (the campaign's reduced dumps)."""
    reduced = (run.get("gputime") or {}).get("pids") or {}
    busy = {p: (reduced.get(str(p)) or {}).get("busy_s") for p in pids}
    if any(v is None for v in busy.values()):
        return None
    total = math.fsum(float(v) for v in busy.values() if v is not None)
    return {p: float(busy[p] or 0.0) / total for p in pids} if total > 0 else None


def shared_busy_s(run: dict[str, Any]) -> dict[int, float] | None:
    """Each process's GPU time in a run with what several claim in the same bin of the campaign's
    reduced intervals shared among them, as the agent shares its 10 ms bins (gputime.share_bin)."""
    from fleetwatt_agent.gputime import share_bin

    reduced = run.get("gputime") or {}
    pids = [int(j["pid"]) for j in run["jobs"]]
    per_pid = [(reduced.get("pids") or {}).get(str(p)) for p in pids]
    if not per_pid or any(v is None for v in per_pid):
        return None
    bins = [v["bins_ms"] for v in per_pid if v is not None]
    # time in stretches too short to hold another's slice (kept whole); none known in older campaigns
    shorts = [v.get("short_bins_ms") for v in per_pid if v is not None]
    bin_us = int(float(reduced["bin_s"]) * 1e6)
    busy = dict.fromkeys(pids, 0.0)
    for i in range(max(len(b) for b in bins)):
        claimed = [int(b[i] * 1000) if i < len(b) else 0 for b in bins]
        short = [int(b[i] * 1000) if b is not None and i < len(b) else 0 for b in shorts]
        shares = share_bin(claimed, bin_us, short if any(b is not None for b in shorts) else None)
        for pid, us in zip(pids, shares, strict=True):
            busy[pid] += us / 1e6
    return busy


def load_campaign(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def analyse(campaign_path: Path, trace_path: Path, methods: Sequence[str] | None = None) -> dict[str, Any]:
    """The table: per mix and repetition, true shares and each method's, errors in points; the summary."""
    campaign = load_campaign(campaign_path)
    mon = Monitor.from_columns(campaign["monitor"])
    idle_by_rep = {int(w["rep"]): idle_power_w(mon, w) for w in campaign["idle_windows"] if int(w["rep"]) >= 0}
    if methods is None:
        methods = [*SPLITS, *([GPU_TIME] if has_gpu_time(trace_path) else [])]
    methods = list(methods)
    energy = {m: agent_energy(trace_path, m) for m in methods}
    runs = [r for r in (run_energy(mon, run) for run in campaign["runs"]) if r is not None]
    raw_runs = {(str(run["label"]), int(run["rep"])): run for run in campaign["runs"]}

    def idle_of(rep: int) -> float:
        return idle_by_rep.get(rep, idle_by_rep.get(0, 0.0))

    # Dynamic energy of each kind alone, per repetition and on average over them.
    dyn_rep: dict[tuple[str, int], float] = {}
    alone: list[dict[str, Any]] = []
    for r in runs:
        if len(r.kinds) == 1:
            d = r.energy_j - idle_of(r.rep) * r.seconds
            dyn_rep[(r.kinds[0], r.rep)] = d
            alone.append(
                {
                    "kind": r.kinds[0],
                    "rep": r.rep,
                    "seconds": round(r.seconds, 3),
                    "energy_j": round(r.energy_j, 1),
                    "mean_power_w": round(r.energy_j / r.seconds, 1),
                    "dynamic_j": round(d, 1),
                }
            )
    kinds = sorted({k for k, _ in dyn_rep})
    dyn_mean = {k: statistics.fmean(v for (kk, _), v in dyn_rep.items() if kk == k) for k in kinds}

    mixes: dict[str, dict[str, Any]] = {}
    for r in runs:
        if len(r.kinds) < 2 or any(k not in dyn_mean for k in r.kinds):
            continue
        name = r.label.removeprefix("mix:")
        dyn_this = {k: dyn_rep.get((k, r.rep), dyn_mean[k]) for k in r.kinds}
        truth = true_shares(r, idle_of(r.rep), dyn_this)
        row: dict[str, Any] = {
            "rep": r.rep,
            "seconds": round(r.seconds, 3),
            "energy_j": round(r.energy_j, 1),
            "true": [round(100 * truth[p], 2) for p in r.pids],
            "truth_from_mean_alone": [round(100 * v, 2) for v in true_shares(r, idle_of(r.rep), dyn_mean).values()],
        }
        for m in methods:
            got = agent_shares(energy[m], r.pids)
            if got is None:
                row[m] = None
                continue
            row[m] = [round(100 * got[p], 2) for p in r.pids]
            row[f"{m}_error_points"] = round(max(abs(100 * (got[p] - truth[p])) for p in r.pids), 2)
        if GPU_TIME in methods:
            raw = raw_runs[(r.label, r.rep)]
            for key, shares in (
                ("time_nvml", nvml_time(trace_path, r.pids, r.t0, r.t1)),
                ("time_cupti", cupti_time(raw, r.pids)),
            ):
                row[key] = [round(100 * shares[p], 2) for p in r.pids] if shares else None
            row["overlap_s"] = round(float((raw.get("gputime") or {}).get("overlap_s", 0.0)), 3)
        mix = mixes.setdefault(name, {"kinds": list(r.kinds), "reps": []})
        mix["reps"].append(row)

    for mix in mixes.values():
        reps = mix["reps"]
        mix["true_mean"] = _mean_lists([x["true"] for x in reps])
        mix["true_spread_points"] = _spread([x["true"][0] for x in reps])
        for m in methods:
            measured = [x for x in reps if x.get(m) is not None]
            if not measured:
                continue
            mix[f"{m}_mean"] = _mean_lists([x[m] for x in measured])
            mix[f"{m}_error_points"] = round(statistics.fmean(x[f"{m}_error_points"] for x in measured), 2)
            mix[f"{m}_spread_points"] = _spread([x[m][0] for x in measured])
    summary: dict[str, Any] = {}
    for m in methods:
        errors = [mix[f"{m}_error_points"] for mix in mixes.values() if f"{m}_error_points" in mix]
        if errors:
            summary[m] = {
                "mean_abs_error_points": round(statistics.fmean(errors), 2),
                "max_error_points": round(max(errors), 2),
                "mixes": len(errors),
            }
    if GPU_TIME in methods:
        summary["time_shares"] = _time_summary(mixes)
    if campaign.get("overhead"):
        summary["overhead_pct"] = {k: v["overhead_pct"] for k, v in campaign["overhead"].get("kinds", {}).items()}
    return {
        "gpu": campaign.get("gpu", {}),
        "idle_power_w": {str(k): round(v, 2) for k, v in idle_by_rep.items()},
        "iters": campaign.get("iters"),
        "alone": alone,
        "dynamic_alone_mean_j": {k: round(v, 1) for k, v in dyn_mean.items()},
        "mixes": mixes,
        "summary": summary,
        "methods": methods,
    }


def _time_summary(mixes: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Where the error of a split of NVML's shares comes from, in mean points of the first job's share:
    NVML's time against the exact time (its sampling and bias), the exact time against the truth (what
    power, not time, decides), over the measurements that have both."""
    nvml, cupti_truth = [], []
    for mix in mixes.values():
        for rep in mix["reps"]:
            if rep.get("time_nvml") and rep.get("time_cupti"):
                nvml.append(abs(rep["time_nvml"][0] - rep["time_cupti"][0]))
                cupti_truth.append(abs(rep["time_cupti"][0] - rep["true"][0]))
    if not nvml:
        return {}
    return {
        "nvml_vs_exact_time_points": round(statistics.fmean(nvml), 2),
        "exact_time_vs_truth_points": round(statistics.fmean(cupti_truth), 2),
        "measurements": len(nvml),
    }


def _mean_lists(rows: list[list[float]]) -> list[float]:
    return [round(statistics.fmean(col), 2) for col in zip(*rows, strict=True)]


def _spread(values: list[float]) -> float:
    return round(max(values) - min(values), 2) if len(values) > 1 else 0.0


def table(results: dict[str, Any]) -> str:
    """The results as a Markdown table (docs/accuracy.md): the first job's share in each mix; with exact
    GPU time, NVML's and CUPTI's time shares of the first job beside them."""
    methods = results["methods"]
    times = GPU_TIME in methods
    head = "| mix | true share of the first job | " + " | ".join(
        f"{m}: share / error (points) / spread" for m in methods
    )
    if times:
        head += " | time share: NVML / exact"
    lines = [head + " | true spread |", "|" + " --- |" * (3 + len(methods) + times)]
    for name, mix in results["mixes"].items():
        cells = [name, f"{mix['true_mean'][0]:.1f} %"]
        for m in methods:
            if f"{m}_mean" in mix:
                cells.append(
                    f"{mix[f'{m}_mean'][0]:.1f} % / {mix[f'{m}_error_points']:.1f} / {mix[f'{m}_spread_points']:.1f}"
                )
            else:
                cells.append("-")
        if times:
            nv = [r["time_nvml"][0] for r in mix["reps"] if r.get("time_nvml")]
            cu = [r["time_cupti"][0] for r in mix["reps"] if r.get("time_cupti")]
            cells.append(f"{statistics.fmean(nv):.1f} % / {statistics.fmean(cu):.1f} %" if nv and cu else "-")
        cells.append(f"{mix['true_spread_points']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    for m in methods:
        s = results["summary"].get(m)
        if s:
            worst, n = s["max_error_points"], s["mixes"]
            lines.append(f"\n{m}: mean absolute error {s['mean_abs_error_points']} points, worst {worst} ({n} mixes)")
    if results["summary"].get("time_shares"):
        lines.append(f"\ntime shares (first job, mean points): {results['summary']['time_shares']}")
    if results["summary"].get("overhead_pct"):
        lines.append(f"overhead of the library, % of a job's work time: {results['summary']['overhead_pct']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Replay kept campaign runs through the current agent.")
    parser.add_argument("folders", nargs="+", type=Path, help="folders with campaign.json.gz and trace.jsonl.gz")
    args = parser.parse_args(argv)
    for folder in args.folders:
        results = analyse(folder / "campaign.json.gz", folder / "trace.jsonl.gz")
        (folder / "replay.json").write_text(json.dumps(results, indent=1) + "\n")
        print(f"== {folder}\n{table(results)}\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
