"""Benchmark: ingest one day of a simulated 1,000-GPU fleet from a real Prometheus.

Reports seconds per cluster-hour, PromQL queries per cluster-hour, the time spent waiting on Prometheus
(the floor: the same queries' HTTP round trips) and Prometheus's own evaluation time, and the ratio.
Target: a cluster-hour of 1,000 GPUs in under 2 s, ingest and derived stage together at most 1.3x the
Prometheus floor.

    .venv/bin/python bench/ingest_cluster_hour.py [--gpus 1000] [--hours 24] [--keep DIR] [--month-days 27]
        [--gpu-settings]

`--gpu-settings`: the agent and dcgm-exporter also export each GPU's power limit and SM clock (what the
GPU-hours keep since issue 37), as a site that added them to dcgm-exporter's counters.

`--month-days N` then copies the day's hour rows into the N days after it and derives some of its hours
again (all of it rolled back): the derived stage on a month's partition as full as on day N + 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleetwatt.settings")
# As deployed: DEBUG off (with it on, Django renders and keeps the text of every query).
os.environ.setdefault("DJANGO_DEBUG", "0")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 40)
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fleetwatt_bench")

import django


def scenario(gpus: int, hours: int, *, gpu_settings: bool = False) -> dict:
    nodes = gpus // 8
    return {
        "gpu_settings": gpu_settings,
        "name": "bench",
        "start": "2026-11-02T00:00:00Z",
        "duration": f"{hours + 1}h",
        "scrape_interval_s": 15,
        "nodes": [{"prefix": "b", "count": nodes, "gpus": 8}],
        "generate": {
            "seed": 3,
            "teams": [{"account": a, "users": ["u1", "u2"]} for a in ("vision", "nlp", "bio", "ads")],
        },
    }


def prometheus_floor(url: str, queries: list[str], hour: datetime) -> tuple[float, float]:
    """The floor: the same queries, one after another, timed to the last byte of each answer (no decoding);
    and Prometheus's own evaluation time for them."""
    floor_s = eval_s = 0.0
    for q in queries:
        t = time.perf_counter()
        r = requests.post(
            f"{url}/api/v1/query", data={"query": q, "time": hour.timestamp() + 3600, "stats": "all"}, timeout=120
        )
        _ = r.content
        floor_s += time.perf_counter() - t
        eval_s += r.json()["data"].get("stats", {}).get("timings", {}).get("execTotalTime", 0.0)
    return floor_s, eval_s


def history_clear(cluster) -> None:  # type: ignore[no-untyped-def]
    """The cluster as before its first ingest: no jobs, hour rows, daily sums or watermark."""
    from apps.jobs.models import Job
    from apps.rollups.models import TeamDay
    from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark

    Job.objects.filter(cluster=cluster).delete()
    GpuHour.objects.filter(gpu__node__cluster=cluster).delete()
    IngestedHour.objects.filter(cluster=cluster).delete()
    IngestWatermark.objects.filter(cluster=cluster).delete()
    TeamDay.objects.filter(cluster=cluster).delete()


def catch_up(cluster, url: str, hours: list[datetime], batch_hours: int) -> None:  # type: ignore[no-untyped-def]
    """The same hours as a catch-up, as the fan-out runs one (apps.pipeline.fanout): each hour fetched and
    written, then one derivation per batch of `batch_hours`. Timed in one process, without Celery."""
    from django.db import transaction

    from apps.pipeline.fanout import hours_derive
    from apps.pipeline.ingest import hour_fetch_shard, hour_write
    from apps.telemetry import services as telemetry
    from apps.telemetry.prometheus import PrometheusReader

    history_clear(cluster)
    ours = floors = derive_s = 0.0
    for first in range(0, len(hours), batch_hours):
        batch = hours[first : first + batch_hours]
        for hour in batch:
            started = time.perf_counter()
            reader = PrometheusReader(url, timeout_s=120)
            fetched = hour_fetch_shard(cluster=cluster, hour=hour, reader=reader, node_match="")
            hour_write(cluster=cluster, hour=hour, fetched=fetched, derive_now=False)
            ours += time.perf_counter() - started
            floors += prometheus_floor(url, reader.log.queries, hour)[0]
            reader.close()
        started = time.perf_counter()
        with transaction.atomic():
            telemetry.cluster_write_lock(cluster=cluster)
            hours_derive(cluster=cluster, start=batch[0], end=batch[-1] + timedelta(hours=1))
        derive_s += time.perf_counter() - started
    total = ours + derive_s
    print(
        f"catch-up of {len(hours)} hours, derived once per {batch_hours} hours: {total / len(hours):.2f}s per "
        f"cluster-hour (of which derived {derive_s / len(hours):.2f}s), floor {floors / len(hours):.2f}s, "
        f"ratio {total / floors:.2f}"
    )


def month_late_derive(cluster, hours: list[datetime], days: int) -> None:  # type: ignore[no-untyped-def]
    """The derived stage of some of the hours again, once the month's partitions hold `days` more days (the
    day's rows copied, the job rows under one filler job): as the bench's Postgres leaves them (no statistics:
    autovacuum off) and after ANALYZE. In one transaction, rolled back."""
    from django.db import connection, transaction

    from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
    from apps.pipeline.derive import Fact, Scope, derive
    from apps.telemetry.models import GpuHour

    def columns(table: str) -> list[str]:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "AND column_name NOT IN ('id', 'hour') ORDER BY ordinal_position",
            [table],
        )
        return [f'"{name}"' for (name,) in cursor.fetchall()]

    with transaction.atomic(), connection.cursor() as cursor:
        filler = Job.objects.create(cluster=cluster, job_key="bench/filler", team=Job.objects.first().team)
        lo, hi = hours[0], hours[-1] + timedelta(hours=1)
        for table, job_rows in (
            (GpuHour._meta.db_table, False),
            (JobGpuHour._meta.db_table, True),
            (JobGpuHourEnergy._meta.db_table, True),
        ):
            names = columns(table)
            picked = [str(filler.pk) if job_rows and n == '"job_id"' else n for n in names]
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(names)}, hour) "
                f"SELECT {', '.join(picked)}, hour + k * interval '1 day' FROM {table}, generate_series(1, %s) k "
                "WHERE hour >= %s AND hour < %s ON CONFLICT DO NOTHING",
                [days, lo, hi],
            )
        for label in ("no statistics", "after ANALYZE"):
            if label == "after ANALYZE":
                cursor.execute("ANALYZE")
            took: list[float] = []
            steps: dict[str, list[float]] = {}
            for hour in hours[4:-3:4] or hours:
                ids = set(
                    JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour).values_list("job_id", flat=True)
                )
                scope = Scope.hour(
                    cluster_id=cluster.pk, hour=hour, job_ids=ids, ingested_through=hour + timedelta(hours=1)
                )
                report = derive(scope, changed={Fact.JOB_ROWS})
                took.append(report.duration_s)
                for name, seconds in report.timings_s.items():
                    steps.setdefault(name, []).append(seconds)
            largest = sorted(steps.items(), key=lambda kv: -statistics.median(kv[1]))[:4]
            print(
                f"derived stage with {days} more days in the month ({label}): median {statistics.median(took):.2f}s; "
                + ", ".join(f"{name} {statistics.median(v):.3f}s" for name, v in largest)
            )
        transaction.set_rollback(True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--keep", type=Path, help="reuse/keep the Prometheus data folder here")
    ap.add_argument("--batch", type=int, default=24, help="hours derived at once in the catch-up run")
    ap.add_argument("--month-days", type=int, default=0, help="then derive again with this many more days")
    ap.add_argument("--gpu-settings", action="store_true", help="the exporters export power limits and clocks too")
    args = ap.parse_args()

    database = os.environ["DATABASE_URL"].rsplit("/", 1)[-1]
    if "bench" not in database:
        raise SystemExit(
            f"DATABASE_URL names {database!r}: the bench drops its database, so it must be one named *bench*"
        )
    # A fresh database each run: with autovacuum off, the rows an earlier run deleted would stay in the
    # partitions and slow this one (docs/benchmarks.md).
    for command in (["dropdb", "--if-exists", database], ["createdb", database]):
        done = subprocess.run([*command, "-h", "127.0.0.1", "-U", "postgres"], capture_output=True, text=True)
        if done.returncode:  # e.g. another run (or a shell) still connected to it
            raise SystemExit(f"{command[0]} {database}: {done.stderr.strip()}")
    django.setup()
    from django.core.management import call_command

    from apps.fleet.models import Cluster
    from apps.jobs.models import Job
    from apps.pipeline.ingest import hour_ingest
    from apps.simulator.engine import FleetSimulation
    from apps.simulator.exposition import openmetrics_write
    from apps.simulator.local_prometheus import LocalPrometheus, config_write, free_port
    from apps.simulator.scenario import scenario_from_dict
    from apps.telemetry.prometheus import PrometheusReader

    call_command("migrate", verbosity=0)  # a fresh database: nothing to clear before the first run
    sc = scenario_from_dict(scenario(args.gpus, args.hours, gpu_settings=args.gpu_settings))
    sim = FleetSimulation(sc)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fleetwatt-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    if not data.exists():
        started = time.perf_counter()
        samples = 0
        files = []
        for k, first in enumerate(range(0, sc.duration_s, 7200)):
            part = sim.scrapes[(sim.scrapes >= first) & (sim.scrapes < first + 7200)]
            path = folder / f"history.{k:03d}.om"
            with path.open("w") as out:
                samples += openmetrics_write(
                    sim.series(np.asarray(part)), out, extra_labels={"job": "sim", "instance": "sim"}
                )
            files.append(path)
        elapsed = time.perf_counter() - started
        print(f"simulated {args.gpus} GPUs, {len(sc.jobs)} jobs, {samples:,} samples in {elapsed:.0f}s")
        started = time.perf_counter()

        def backfill(path: Path) -> None:
            subprocess.run(
                ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(path), str(data)],
                check=True,
                capture_output=True,
            )
            path.unlink()

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(backfill, files))
        print(f"backfilled with promtool in {time.perf_counter() - started:.0f}s")
    config_write(folder / "prometheus.yml", targets=[], scrape_interval_s=15)
    prom = LocalPrometheus(data, folder / "prometheus.yml", free_port())
    prom.start(log=folder / "prometheus.log", timeout_s=300)
    try:
        cluster, _ = Cluster.objects.update_or_create(
            name="bench", defaults={"prometheus_url": prom.url, "scrape_interval_s": 15}
        )
        rows = []
        steps: dict[str, list[float]] = {}
        for h in range(args.hours):
            hour = datetime(2026, 11, 2, tzinfo=UTC) + timedelta(hours=h)
            reader = PrometheusReader(prom.url, timeout_s=120)
            report = hour_ingest(cluster=cluster, hour=hour, reader=reader)
            floor_s, eval_s = prometheus_floor(prom.url, reader.log.queries, hour)
            rows.append((report.duration_s, report.query_count, floor_s, eval_s, report.jobs, report.derive_s))
            for name, seconds in report.derive_steps_s.items():
                steps.setdefault(name, []).append(seconds)
            reader.close()
            print(
                f"{hour:%H}:00  {report.duration_s:.2f}s  queries={report.query_count}  "
                f"floor={floor_s:.2f}s (eval {eval_s:.2f}s)  jobs={report.jobs}  derived {report.derive_s:.2f}s"
            )
        total = [r[0] for r in rows]
        floor = [r[2] for r in rows]
        print()
        print(f"GPUs: {args.gpus}   hours: {len(rows)}   jobs: {Job.objects.count()}")
        p95 = sorted(total)[int(0.95 * (len(total) - 1))]
        print(f"seconds per cluster-hour: median {statistics.median(total):.2f}  p95 {p95:.2f}  max {max(total):.2f}")
        print(f"PromQL queries per cluster-hour: {sorted({r[1] for r in rows})}")
        print(
            f"Prometheus floor (the same queries one by one) per hour: median {statistics.median(floor):.2f}s; "
            f"its own evaluation: median {statistics.median(r[3] for r in rows):.2f}s"
        )
        print(f"ratio ingest / floor: median {statistics.median(t / f for t, f in zip(total, floor, strict=True)):.2f}")
        ingest_only = [r[0] - r[5] for r in rows]
        print(
            f"without the derived footprints, findings and daily sums: median {statistics.median(ingest_only):.2f}s, "
            f"ratio {statistics.median(t / f for t, f in zip(ingest_only, floor, strict=True)):.2f}"
        )
        print("the derived stage by step (apps.pipeline.derive), median per cluster-hour:")
        median_total = statistics.median(total)
        for name, seconds in steps.items():
            share = 100 * statistics.median(seconds) / median_total
            print(f"  {name:<28} {statistics.median(seconds):.3f}s  ({share:.1f} % of the cluster-hour)")
        print()
        hours = [datetime(2026, 11, 2, tzinfo=UTC) + timedelta(hours=h) for h in range(args.hours)]
        catch_up(cluster, prom.url, hours, args.batch)
        if args.month_days:
            month_late_derive(cluster, hours, args.month_days)
    finally:
        prom.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
