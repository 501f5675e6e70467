"""Benchmark: the fanned-out ingest (apps.pipeline.fanout) with real Celery worker processes through Redis.

For each fleet size (default 1,000, 3,000 and 10,000 GPUs in one cluster, sharded by rack into groups of
--shard-gpus), and for 10 clusters of 1,000 GPUs: simulate the hours, backfill them into a real Prometheus
with promtool, start --workers worker processes, let beat's task dispatch the batch, and time it from the
dispatch to the batch derived. Side by side, in the same run: the Prometheus floor, i.e. the very queries
the parts ran (every shard-hour's), run with the workers' concurrency and nothing else.

Reports per cluster-hour: wall seconds, the floor, their ratio, queries per shard-hour, and the workers'
CPU seconds per 1,000 GPUs (our cost per GPU, which should stay flat as the fleet grows).

    .venv/bin/python bench/ingest_fanout.py [--sizes 1000,3000,10000] [--hours 3] [--batch 1] [--workers 2]
        [--keep DIR]

`--batch 1` times beat's hourly steady state (a batch of the last closed hour); by default the batch is
every hour of the history, as after an outage (one derivation for all of them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Overridable, so that two runs (two checkouts side by side) need not share a database or a broker.
DATABASE = os.environ.get("FLEETWATT_BENCH_DATABASE", "fleetwatt_bench_fanout")
REDIS = os.environ.get("FLEETWATT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleetwatt.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")
os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{DATABASE}"
os.environ["REDIS_URL"] = REDIS

import django  # noqa: E402 (after the environment it reads)

H0 = datetime(2026, 11, 2, tzinfo=UTC)
RACK_GPUS = 1000  # one rack: 125 nodes of 8 GPUs, its nodes named r<NN>-<k>


def scenario(gpus: int, hours: int) -> dict:
    racks = max(1, gpus // RACK_GPUS)
    per_rack = gpus // racks // 8
    return {
        "name": f"bench-{gpus}",
        "start": H0.isoformat().replace("+00:00", "Z"),
        "duration": f"{hours + 1}h",
        "scrape_interval_s": 15,
        "nodes": [{"prefix": f"r{r:02d}-", "count": per_rack, "gpus": 8} for r in range(racks)],
        "generate": {
            "seed": 3,
            "teams": [{"account": a, "users": ["u1", "u2"]} for a in ("vision", "nlp", "bio", "ads")],
        },
    }


def history_backfill(raw: dict, data: Path, *, copies: list[dict[str, str]]) -> None:
    """Simulate the scenario and backfill it with promtool, once per set of extra labels in `copies`."""
    from apps.simulator.engine import FleetSimulation
    from apps.simulator.exposition import openmetrics_write
    from apps.simulator.scenario import scenario_from_dict

    started = time.perf_counter()
    sc = scenario_from_dict(raw)
    sim = FleetSimulation(sc)
    files = []
    for c, labels in enumerate(copies):
        for k, first in enumerate(range(0, sc.duration_s, 7200)):
            part = sim.scrapes[(sim.scrapes >= first) & (sim.scrapes < first + 7200)]
            path = data.parent / f"history.{c:02d}.{k:03d}.om"
            with path.open("w") as out:
                openmetrics_write(sim.series(np.asarray(part)), out, extra_labels={"job": "sim", **labels})
            files.append(path)

    def backfill(path: Path) -> None:
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(path), str(data)],
            check=True,
            capture_output=True,
        )
        path.unlink()

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(backfill, files))
    print(f"  simulated and backfilled {raw['name']} x{len(copies)} in {time.perf_counter() - started:.0f}s")


def victoria_start(raw: dict, folder: Path, *, copies: list[dict[str, str]]):
    """VictoriaMetrics holding the very samples promtool backfills (imported once, kept in `folder`)."""
    from apps.simulator.engine import FleetSimulation
    from apps.simulator.exposition import import_text_write
    from apps.simulator.local_victoria import LocalVictoria
    from apps.simulator.scenario import scenario_from_dict

    fresh = not (folder / "data").exists()
    folder.mkdir(parents=True, exist_ok=True)
    victoria = LocalVictoria(folder / "data")
    victoria.start(log=folder / "victoria-metrics.log", timeout_s=600)
    if fresh:
        started = time.perf_counter()
        sc = scenario_from_dict(raw)
        sim = FleetSimulation(sc)
        for labels in copies:
            for first in range(0, sc.duration_s, 7200):
                part = sim.scrapes[(sim.scrapes >= first) & (sim.scrapes < first + 7200)]
                path = folder / "history.txt"
                with path.open("w") as out:
                    import_text_write(sim.series(np.asarray(part)), out, extra_labels={"job": "sim", **labels})
                victoria.history_import(path)
                path.unlink()
        print(f"  simulated and imported {raw['name']} x{len(copies)} in {time.perf_counter() - started:.0f}s")
    return victoria


class Workers:
    """`celery worker` processes (prefork, one pool process each) on the bench's database and Redis."""

    def __init__(self, n: int, logs: Path) -> None:
        # As deployed: DEBUG off (Django keeps no query log), connections kept between tasks.
        env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "bench-only"}
        self.logs = logs
        self.procs = []
        for i in range(n):
            with (logs / f"worker-{i}.log").open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "celery",
                            "-A",
                            "fleetwatt",
                            "worker",
                            "--pool",
                            "prefork",
                            "--concurrency",
                            "1",
                            "--without-heartbeat",
                            "--without-mingle",
                            "--without-gossip",
                            "-l",
                            "warning",
                            "-n",
                            f"bench{i}@%h",
                        ],
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )

    def cpu_s(self) -> float:
        """User + system seconds of the workers and their pool processes so far."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for proc in self.procs:
            pids = [proc.pid]
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
            if children.exists():
                pids += [int(p) for p in children.read_text().split()]
            for pid in pids:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except FileNotFoundError:
                    continue
                total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=60)


@dataclass
class Run:
    label: str
    gpus: int
    clusters: int
    hours: int
    shards_per_hour: int
    wall_s: float
    floor_s: float
    queries_per_shard_hour: list[int]
    worker_cpu_s: float
    bytes_per_gpu_hour: float  # the hour tables on disk (rows, indexes) per GPU-hour stored


def floor(prom_url: str, queries: list[tuple[str, float]], concurrency: int) -> float:
    """The same queries with the workers' concurrency and nothing else: wall seconds to the last byte."""

    def one(item: tuple[str, float]) -> None:
        q, at = item
        requests.post(f"{prom_url}/api/v1/query", data={"query": q, "time": at}, timeout=300).content  # noqa: B018

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, queries))
    return time.perf_counter() - started


def shard_queries(cluster, hours: list[datetime], windows_open_left: bool) -> list[tuple[str, float]]:
    """Every query the parts asked (the fixed ones per shard-hour; the bench's fleet has no counter reset)."""
    from django.conf import settings

    from apps.pipeline.fanout import shards_of
    from apps.telemetry import promql

    out = []
    for shard in shards_of(cluster):
        queries = promql.HourQueries(
            cluster_selector=cluster.selector,
            scrape_interval_s=cluster.scrape_interval_s,
            lookback_s=settings.FLEETWATT_COUNTER_LOOKBACK_S,
            node_match=shard.node_match,
            windows_open_left=windows_open_left,  # as the reader asks VictoriaMetrics (apps.telemetry.prometheus)
        )
        batch = [queries.counter_window(m) for m in (*promql.AGENT_COUNTERS, promql.DCGM_ENERGY)]
        batch += [queries.job_gauges(), queries.job_info(), queries.dcgm_series()]
        out += [(q, hour.timestamp() + 3600) for hour in hours for q in batch]
    return out


def measure(
    label: str, clusters: list, hours: int, batch: int, workers: Workers, prom_url: str, concurrency: int,
    *, windows_open_left: bool = False,
) -> Run:  # fmt: skip
    """Beat's batch of the last `batch` of the history's `hours` (1: the hourly steady state), timed."""
    from django.db import connection

    from apps.fleet.services import default_cluster_ensure
    from apps.telemetry.models import GpuHour, IngestBatch, IngestedHour, IngestWatermark
    from apps.telemetry.partitions import hour_tables_bytes
    from apps.telemetry.tasks import ingest_dispatch_task

    for cluster in clusters:
        start = H0 + timedelta(hours=hours - batch)
        IngestWatermark.objects.update_or_create(cluster=cluster, defaults={"ingested_through": start})
    # The settings' default cluster (beat's dispatch creates it) has nothing to ingest here.
    IngestWatermark.objects.update_or_create(
        cluster=default_cluster_ensure(), defaults={"ingested_through": H0 + timedelta(days=3650)}
    )
    now = H0 + timedelta(hours=hours, minutes=5)
    cpu0 = workers.cpu_s()
    started = time.perf_counter()
    ingest_dispatch_task(now_iso=now.isoformat())
    names = [c.name for c in clusters]
    while IngestBatch.objects.filter(cluster__name__in=names, done_at__isnull=True).exists():
        failed = IngestBatch.objects.filter(cluster__name__in=names, done_at__isnull=True).exclude(error="").first()
        if failed is not None:  # nobody runs beat here to queue the part again: stop rather than wait forever
            raise SystemExit(f"{label}: a part failed: {failed.error} (the workers' logs: {workers.logs})")
        time.sleep(0.05)
    wall = time.perf_counter() - started
    cpu = workers.cpu_s() - cpu0
    window = [H0 + timedelta(hours=h) for h in range(hours - batch, hours)]
    shards = len(IngestBatch.objects.filter(cluster=clusters[0]).latest("queued_at").shards)
    counts = sorted(
        {
            q // shards
            for q in IngestedHour.objects.filter(cluster__in=clusters, hour__in=window).values_list(
                "query_count", flat=True
            )
        }
    )
    queries = [q for cluster in clusters for q in shard_queries(cluster, window, windows_open_left)]
    floor_s = floor(prom_url, queries, concurrency)
    gpus = sum(c.gpus for c in clusters)  # type: ignore[attr-defined]
    with connection.cursor() as cursor:  # live rows only: the derivation's updates leave dead versions behind
        cursor.execute("VACUUM FULL telemetry_gpuhour, jobs_jobgpuhour, jobs_jobgpuhourenergy")
    _, size = hour_tables_bytes()
    stored = GpuHour.objects.filter(gpu__node__cluster__in=clusters).count()
    return Run(label, gpus, len(clusters), batch, shards, wall, floor_s, counts, cpu, size / max(stored, 1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,3000,10000")
    ap.add_argument("--clusters-of-1000", type=int, default=10, help="0: leave the many-clusters run out")
    ap.add_argument("--hours", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0, help="hours in beat's batch, the last ones (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-gpus", type=int, default=RACK_GPUS)
    ap.add_argument("--keep", type=Path, help="reuse/keep the Prometheus data folders here")
    ap.add_argument(
        "--engines",
        default="prometheus",
        help="prometheus, victoria-metrics or both (comma-separated): the same history in each, side by side",
    )
    args = ap.parse_args()

    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", DATABASE], capture_output=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", DATABASE], check=True, capture_output=True)
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from apps.fleet.models import Cluster
    from apps.simulator.local_prometheus import LocalPrometheus, config_write, free_port
    from apps.telemetry.models import ClusterShard
    from apps.telemetry.tasks import ingest_dispatch_task

    call_command("migrate", verbosity=0)
    ingest_dispatch_task.app.control.purge()
    root = args.keep or Path(tempfile.mkdtemp(prefix="fleetwatt-bench-fanout-"))
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    concurrency = args.workers * 3  # each part runs its queries three at a time (apps.telemetry.fetch)
    plans = [(f"{g:,} GPUs, one cluster", g, 1) for g in (int(s) for s in args.sizes.split(",") if s)]
    if args.clusters_of_1000:
        plans.append((f"{args.clusters_of_1000} clusters x 1,000 GPUs", 1000, args.clusters_of_1000))
    runs: list[Run] = []
    workers = Workers(args.workers, logs)
    try:
        # The first run warms the workers up (imports, connections, Django's caches) and is not reported.
        schedule = [(p, e) for p in plans for e in args.engines.split(",")]
        for n, ((plan_label, gpus, copies), engine) in enumerate([schedule[0], *schedule]):
            warm_up = n == 0
            label = plan_label if engine == "prometheus" else f"{plan_label}, {engine}"
            print(label + (" (warm-up, not reported)" if warm_up else ""))
            folder = root / f"{gpus}x{copies}"
            copy_labels = [{"cluster": f"c{k:02d}"} for k in range(copies)]
            if engine == "victoria-metrics":
                prom = victoria_start(scenario(gpus, args.hours), folder / "victoria", copies=copy_labels)
            else:
                data = folder / "data"
                folder.mkdir(parents=True, exist_ok=True)
                if not data.exists():
                    data.mkdir()
                    history_backfill(scenario(gpus, args.hours), data, copies=copy_labels)
                config_write(folder / "prometheus.yml", targets=[], scrape_interval_s=15)
                prom = LocalPrometheus(data, folder / "prometheus.yml", free_port())
                prom.start(log=folder / "prometheus.log", timeout_s=600)
            try:
                with connection.cursor() as cursor:  # space back too: the hour tables' size is measured below
                    cursor.execute("TRUNCATE telemetry_gpuhour, jobs_jobgpuhour, jobs_jobgpuhourenergy")
                Cluster.objects.all().delete()
                clusters = []
                for k in range(copies):
                    cluster = Cluster.objects.create(
                        name=f"bench-{gpus}-{k:02d}",
                        prometheus_url=prom.url,
                        scrape_interval_s=15,
                        selector=f'cluster="c{k:02d}"',
                    )
                    racks = max(1, gpus // RACK_GPUS)
                    per_shard = max(1, args.shard_gpus // RACK_GPUS)
                    for s in range(0, racks - per_shard, per_shard):  # the last group is the `rest` shard
                        names = "|".join(f"r{r:02d}" for r in range(s, min(racks, s + per_shard)))
                        ClusterShard.objects.create(cluster=cluster, name=f"s{s:02d}", node_pattern=f"(?:{names})-.*")
                    cluster.gpus = gpus  # type: ignore[attr-defined]
                    clusters.append(cluster)
                r = measure(label, clusters, args.hours, args.batch or args.hours, workers, prom.url, concurrency,
                            windows_open_left=engine == "victoria-metrics")  # fmt: skip
                if not warm_up:
                    runs.append(r)
                print(
                    f"  {r.wall_s:.1f}s for {r.hours} h: {r.wall_s / r.hours:.2f}s per hour of the fleet; floor "
                    f"{r.floor_s / r.hours:.2f}s; ratio {r.wall_s / r.floor_s:.2f}; queries per shard-hour "
                    f"{r.queries_per_shard_hour}; workers' CPU {1000 * r.worker_cpu_s / r.gpus / r.hours:.2f}s "
                    f"per 1,000 GPU-hours; hour tables {r.bytes_per_gpu_hour:,.0f} bytes per GPU-hour"
                )
            finally:
                prom.stop()
    finally:
        workers.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(
        f"workers: {args.workers} (prefork, one process each), on {os.cpu_count()} cores with Prometheus and Postgres"
    )
    print("| fleet | shards per hour | s per hour of the fleet | Prometheus floor | ratio | queries per shard-hour "
          "| workers' CPU s per 1,000 GPU-hours | hour tables, bytes per GPU-hour |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(
            f"| {r.label} | {r.shards_per_hour} | {r.wall_s / r.hours:.2f} | {r.floor_s / r.hours:.2f} | "
            f"{r.wall_s / r.floor_s:.2f} | {', '.join(map(str, r.queries_per_shard_hour))} | "
            f"{1000 * r.worker_cpu_s / r.gpus / r.hours:.2f} | {r.bytes_per_gpu_hour:,.0f} |"
        )
    print("bytes per GPU-year of the hour tables: 8,760 x bytes per GPU-hour (docs/operations.md, History)")


if __name__ == "__main__":
    main()
