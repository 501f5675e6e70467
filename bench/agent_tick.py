"""CPU per tick of fleetwatt-agent for 8 GPUs with 20 processes, on the replay backend (where the
agent's own code is all there is). Target: under 0.5 ms per tick. Run: .venv/bin/python bench/agent_tick.py

Prints three figures: the agent's work per tick (resolve, split, counters) on readings already in
memory; the same plus reading and decoding the JSON trace (the replay backend's own cost); and one
/metrics scrape and one /jobs document of that node. The real-driver cost (NVML calls) is measured on
the H200 by agent/scripts/gpu_two_jobs.sh; see docs/agent-h200.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))

from fleetwatt_agent.backends.replay import ReplayBackend
from fleetwatt_agent.collector import make_registry
from fleetwatt_agent.errors import ReplayFinished
from fleetwatt_agent.model import BackendInfo, GpuInfo, GpuReading, JobInfo, ProcessReading, TickReading
from fleetwatt_agent.recorder import header, tick_record
from fleetwatt_agent.sampler import Sampler, SamplerSettings
from fleetwatt_agent.server import jobs_document
from prometheus_client import generate_latest

N_GPUS, N_PROCS = 8, 20


def synthetic(ticks: int, seed: int = 7) -> tuple[BackendInfo, list[TickReading], dict[int, JobInfo]]:
    """20 processes of 12 jobs on 8 GPUs: some GPUs shared, one job on 4 GPUs; the counter every 10 s."""
    rng = random.Random(seed)
    info = BackendInfo(
        "synthetic",
        tuple(GpuInfo(i, f"GPU-bench-{i:02d}", "Bench GPU", True) for i in range(N_GPUS)),
        driver="bench",
        process_utilization="supported",
        accounting_mode="disabled",
    )
    pids = list(range(1000, 1000 + N_PROCS))
    placement = {pid: i % N_GPUS for i, pid in enumerate(pids)}  # 2 or 3 processes per GPU
    jobs = {
        pid: JobInfo(f"slurm/{500 + i % 12}", "slurm", str(500 + i % 12), "user", start_time=1.7e9)
        for i, pid in enumerate(pids)
    }
    energy = [10**9] * N_GPUS
    readings = []
    for t in range(ticks):
        gpus = []
        for g in range(N_GPUS):
            power = rng.uniform(80, 700)
            energy[g] += int(power * 1000)
            procs = tuple(
                ProcessReading(pid, rng.randrange(1, 40) * 2**30, rng.choice([None, rng.uniform(0, 100)]))
                for pid, where in placement.items()
                if where == g
            )
            gpus.append(
                GpuReading(
                    g, power, sum(p.memory_bytes for p in procs), procs, energy[g] if t % 10 == 0 else None, "sm"
                )
            )
        readings.append(TickReading(1.7e9 + t, 1000.0 + t, tuple(gpus)))
    return info, readings, jobs


class InMemory:
    name, self_paced = "bench", True

    def __init__(self, readings: list[TickReading], jobs: dict[int, JobInfo]) -> None:
        self.readings, self.jobs, self.i = readings, jobs, 0

    def read(self, *, read_energy: bool) -> TickReading:
        if self.i >= len(self.readings):
            raise ReplayFinished("done")
        self.i += 1
        return self.readings[self.i - 1]

    def resolve(self, pid: int) -> JobInfo:
        return self.jobs[pid]


def cpu_per_call(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    info, readings, jobs = synthetic(args.ticks)
    settings = SamplerSettings(hostname="bench", energy_interval_s=10.0)

    own = []
    for _ in range(args.repeat):
        backend = InMemory(readings, jobs)
        sampler = Sampler(backend, info, backend, settings)  # type: ignore[arg-type]
        own.append(cpu_per_call(sampler.tick, args.ticks))

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "bench.jsonl"
        with open(trace, "w") as f:
            f.write(json.dumps(header(info, hostname="bench", interval_s=1.0, energy_interval_s=10.0)) + "\n")
            for i, r in enumerate(readings):
                new = {pid: j for pid, j in jobs.items()} if i == 0 else {}
                f.write(json.dumps(tick_record(r, new, []), separators=(",", ":")) + "\n")
        replay = []
        for _ in range(args.repeat):
            backend = ReplayBackend(trace, speed=0, keep_time=True)
            sampler = Sampler(backend, backend.open(), backend.resolver(), settings)
            replay.append(cpu_per_call(sampler.tick, args.ticks))
            backend.close()

    registry = make_registry(sampler.snapshot, process_metrics=False)
    scrape = cpu_per_call(lambda: generate_latest(registry), 200)
    jobs_doc = cpu_per_call(lambda: json.dumps(jobs_document(sampler.snapshot())), 200)
    series = generate_latest(registry).decode().count("\n")

    figures = {
        "gpus": N_GPUS,
        "processes": N_PROCS,
        "jobs": len({j.job_key for j in jobs.values()}),
        "ticks": args.ticks,
        "agent_ms_per_tick": 1000 * statistics.median(own),
        "agent_plus_trace_decode_ms_per_tick": 1000 * statistics.median(replay),
        "metrics_scrape_ms": 1000 * scrape,
        "jobs_document_ms": 1000 * jobs_doc,
        "metrics_lines": series,
        "target_ms_per_tick": 0.5,
        "python": sys.version.split()[0],
    }
    print(
        f"fleetwatt-agent tick, {N_GPUS} GPUs x {N_PROCS} processes ({figures['jobs']} jobs), "
        f"replay backend, {args.ticks} ticks, median of {args.repeat}:"
    )
    print(f"  agent's own work per tick      {figures['agent_ms_per_tick']:.3f} ms CPU  (target < 0.5 ms)")
    print(f"  + reading the JSON trace       {figures['agent_plus_trace_decode_ms_per_tick']:.3f} ms CPU")
    print(f"  one /metrics scrape            {figures['metrics_scrape_ms']:.3f} ms CPU  ({series} lines)")
    print(f"  one /jobs document             {figures['jobs_document_ms']:.3f} ms CPU")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0 if figures["agent_ms_per_tick"] < 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
