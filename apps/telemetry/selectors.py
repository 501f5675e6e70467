"""Reads of the ingested GPU-hours."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Avg, Count, Max, Min, OuterRef, Subquery, Sum

from apps.core.metrics import ClusterIngest
from apps.fleet.models import Cluster
from apps.jobs.methods import Method
from apps.jobs.models import JobGpuHour, JobGpuHourEnergy, JobWorkHour, Source
from apps.jobs.uncertainty import NO_BAND, BandRow

from .guard import HourTotals
from .models import GpuHour, IngestedHour

HOUR = timedelta(hours=1)


class SampledSeconds(Mapping[tuple[int, datetime], float]):
    """The agent's sampled seconds per (GPU, hour) within each GPU's span: the hours it did not watch whole
    as read, every other hour of the span a whole hour. Outside the spans, no entry."""

    def __init__(self, short: dict[tuple[int, datetime], float], spans: Mapping[int, tuple[datetime, datetime]]):
        self._short, self._spans = short, spans
        self._len: int | None = None

    def __getitem__(self, key: tuple[int, datetime]) -> float:
        if key in self._short:
            return self._short[key]
        gpu_id, hour = key
        span = self._spans.get(gpu_id)
        if span is None or not (_hour_of(span[0]) <= hour <= span[1]):
            raise KeyError(key)
        return 3600.0

    def __iter__(self) -> Iterator[tuple[int, datetime]]:
        for gpu_id, (lo, hi) in self._spans.items():
            hour = _hour_of(lo)
            while hour <= hi:
                yield gpu_id, hour
                hour += HOUR

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum((hi - _hour_of(lo)) // HOUR + 1 for lo, hi in self._spans.values() if hi >= _hour_of(lo))
        return self._len


def _hour_of(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def gpu_sampled_seconds(*, spans: Mapping[int, tuple[datetime, datetime]]) -> SampledSeconds:
    """The agent's sampled seconds of every GPU-hour the spans touch, per (GPU, hour) (an hour with no row:
    0). Postgres walks each GPU's own span and returns only the hours not watched whole, so the read stays
    small however long the jobs run (a week-long job on a thousand GPUs is 168,000 GPU-hours, nearly all
    watched whole). The GPU-hours joined are bounded by the spans' GPUs and hours (implied by the join, but
    spelled out: without statistics, Postgres otherwise read the month's whole partition)."""
    if not spans:
        return SampledSeconds({}, {})
    gpu_ids = list(spans)
    los = [_hour_of(spans[g][0]) for g in gpu_ids]
    his = [spans[g][1] for g in gpu_ids]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.gpu_id, h.hour, COALESCE(g.sampled_s, 0) "
            "FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[]) AS s(gpu_id, lo, hi) "
            "CROSS JOIN LATERAL generate_series(s.lo, s.hi, interval '1 hour') AS h(hour) "
            f'LEFT JOIN "{GpuHour._meta.db_table}" g ON g.gpu_id = s.gpu_id AND g.hour = h.hour '
            "AND g.gpu_id = ANY(%s::bigint[]) AND g.hour >= %s AND g.hour <= %s "
            "WHERE g.id IS NULL OR g.sampled_s < 3600",
            [gpu_ids, los, his, gpu_ids, min(los), max(his)],
        )
        short = {(gpu_id, hour): float(sampled) for gpu_id, hour, sampled in cursor.fetchall()}
    return SampledSeconds(short, spans)


def job_band_rows(*, job_ids: Iterable[int]) -> dict[int, list[BandRow]]:
    """Each job's energy on shared GPUs, per GPU-hour and split method, with the energy of every job on that GPU-hour
    and the job's seconds sampled in it (apps.jobs.uncertainty): one query; whole-GPU and estimated rows left out."""
    gpu_jobs_j = GpuHour.objects.filter(gpu_id=OuterRef("gpu_id"), hour=OuterRef("hour")).values("jobs_energy_j")[:1]
    sampled = JobGpuHour.objects.filter(
        job_id=OuterRef("job_id"), gpu_id=OuterRef("gpu_id"), hour=OuterRef("hour")
    ).exclude(source=Source.ESTIMATED)
    rows = (
        JobGpuHourEnergy.objects.filter(job_id__in=sorted(set(job_ids)))
        .exclude(method__in=[Method(m).value for m in NO_BAND])
        .annotate(gpu_jobs_j=Subquery(gpu_jobs_j), samples=Subquery(sampled.values("sampled_s")[:1]))
        .values_list("job_id", "method", "energy_j", "gpu_jobs_j", "samples")
    )
    out: dict[int, list[BandRow]] = {}
    for job_id, method, energy_j, jobs_j, samples in rows:
        out.setdefault(job_id, []).append(BandRow(method, energy_j, jobs_j or 0.0, samples or 0.0))
    return out


def clusters_ingested_through(*, cluster_ids: Iterable[int]) -> dict[int, datetime]:
    """Per cluster, the end of the latest hour ingested."""
    rows = (
        IngestedHour.objects.filter(cluster_id__in=sorted(set(cluster_ids)))
        .values("cluster_id")
        .annotate(latest=Max("hour"))
        .order_by()
    )
    return {r["cluster_id"]: r["latest"] + timedelta(hours=1) for r in rows}


def clusters_meterless_gpus() -> dict[int, list[dict[str, Any]]]:
    """Per cluster, the GPUs its latest ingested hour saw with no energy meter (vGPU guests, exporters without
    the fields): their energy is not stored, and the status page and /healthz say so. One row per cluster."""
    latest = (
        IngestedHour.objects.order_by("cluster_id", "-hour").distinct("cluster_id").values_list("cluster_id", "stats")
    )
    return {cluster_id: list((stats or {}).get("no_energy_meter", [])) for cluster_id, stats in latest}


def ingest_progress_read() -> list[ClusterIngest] | None:
    """Per cluster, its watermark and its last ingest run (the cluster-hour written last: its duration and
    rows per table), for /metrics; None when the database cannot be read (the scrape serves the rest)."""
    try:
        marks = list(Cluster.objects.order_by("name").values_list("pk", "name", "watermark__ingested_through"))
        # The last run of each cluster: DISTINCT ON (cluster), newest first. One row per cluster-hour, so
        # a few thousand rows a year per cluster.
        last = {
            r["cluster_id"]: r
            for r in IngestedHour.objects.order_by("cluster_id", "-ingested_at")
            .distinct("cluster_id")
            .values("cluster_id", "duration_s", "stats")
        }
    except DatabaseError:
        return None
    progress = []
    for pk, name, through in marks:
        run = last.get(pk)
        rows = (run["stats"] or {}).get("rows", {}) if run else {}
        progress.append(
            ClusterIngest(
                cluster=name,
                ingested_through=through,
                last_duration_s=run["duration_s"] if run else None,
                last_rows={str(t): int(n) for t, n in rows.items()},
            )
        )
    return progress


def stored_hour_totals(*, cluster: Cluster, hour: datetime) -> HourTotals:
    """What is stored for the cluster-hour: its GPUs, job rows and the GPUs' energy."""
    if not IngestedHour.objects.filter(cluster=cluster, hour=hour).exists():
        return HourTotals()  # rows are only ever written with this record, in one transaction
    hours = GpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour)
    energy = hours.aggregate(energy_j=Sum("device_energy_j"))["energy_j"] or 0.0
    job_rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour=hour).exclude(source=Source.ESTIMATED).count()
    return HourTotals(
        gpus=frozenset(hours.values_list("gpu__uuid", flat=True)),
        job_rows=job_rows,
        device_energy_j=energy,
        work_rows=JobWorkHour.objects.filter(hour=hour, job__cluster=cluster).count(),
    )


def pending_job_ids(*, cluster: Cluster, hour: datetime) -> set[int]:
    """The jobs an earlier write of the hour changed that have not been derived yet (none, usually)."""
    ids = IngestedHour.objects.filter(cluster=cluster, hour=hour, derived=False).values_list(
        "pending_job_ids", flat=True
    )
    return {job_id for row in ids for job_id in row}


def ingested_through(cluster: Cluster, hour: datetime) -> datetime:
    """The end of the latest hour ingested for the cluster, `hour` included."""
    latest = IngestedHour.objects.filter(cluster=cluster).order_by("-hour").values_list("hour", flat=True).first()
    return max(hour, latest) + HOUR if latest else hour + HOUR


@dataclass(frozen=True)
class PeriodSettings:
    """A GPU's power limit and SM clock over a period (docs/arithmetic.md, "A GPU's settings over a period"): the
    mean of its GPU-hours' means where known (each GPU-hour alike: a limit is a setting held over the hour), the
    least of their least and most of their most, and how many GPU-hours knew each; None where none did."""

    hours: int
    power_limit_w: float | None
    power_limit_min_w: float | None
    power_limit_max_w: float | None
    power_limit_hours: int
    sm_clock_mhz: float | None
    sm_clock_hours: int


def gpu_settings_over(*, gpu_id: int, start: datetime | None, end: datetime | None) -> PeriodSettings:
    """The GPU's settings over its GPU-hours in [start, end) (either open), in one aggregate query."""
    rows = GpuHour.objects.filter(gpu_id=gpu_id)
    if start is not None:
        rows = rows.filter(hour__gte=start)
    if end is not None:
        rows = rows.filter(hour__lt=end)
    # Named apart from the columns: Count("power_limit_w") would read an aggregate named power_limit_w.
    got = rows.aggregate(
        n=Count("pk"),
        limit_mean=Avg("power_limit_w"),
        limit_least=Min("power_limit_min_w"),
        limit_most=Max("power_limit_max_w"),
        limit_n=Count("power_limit_w"),
        clock_mean=Avg("sm_clock_mhz"),
        clock_n=Count("sm_clock_mhz"),
    )
    return PeriodSettings(
        hours=got["n"],
        power_limit_w=got["limit_mean"],
        power_limit_min_w=got["limit_least"],
        power_limit_max_w=got["limit_most"],
        power_limit_hours=got["limit_n"],
        sm_clock_mhz=got["clock_mean"],
        sm_clock_hours=got["clock_n"],
    )
