"""Reads of jobs: the per-job aggregate every derived step reads, and the dashboards' job lists
(aggregated in the database, scoped through Job.objects.visible_to)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from operator import itemgetter

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.aggregates import BoolOr
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet, Sum

from apps.core.units.aggregates import exact_sum, footprint_sums
from apps.core.units.footprint import FOOTPRINT_COLUMNS, S_PER_HOUR, Footprint
from apps.fleet.models import Team

from .models import ExpiredJobDay, Job, JobGpuHour, JobGpuHourEnergy, JobWorkHour, Source
from .per_token import Served, ServingJob
from .summary import JobGpuTotals
from .utilisation import JobUtilisation, UtilisationRow, job_utilisation

User = AbstractBaseUser | AnonymousUser
HOUR = timedelta(hours=1)


def low_coverage_jobs(
    *, user: User, start: datetime, end: datetime, threshold: float, team: Team | None = None
) -> list[Job]:
    """Jobs in the period (of one team, or of every team the user sees) whose coverage is under the
    threshold, worst first."""
    jobs = Job.objects.visible_to(user).filter(start__lt=end, coverage__lt=threshold, sampled_s__gt=0)
    if team is not None:
        jobs = jobs.filter(team=team)
    return list(jobs.seen_since(start).select_related("team", "cluster").order_by("coverage", "id"))


def gpu_hour_job_counts(*, job: Job) -> dict[tuple[int, datetime], int]:
    """{(GPU id, hour): jobs with a measured row there} for the GPU-hours the job ran in (apps.jobs.utilisation:
    its time on a shared GPU). One query, bounded by the job's GPUs and hours (index jobgpuhour_gpu_hour)."""
    own = job.gpu_hours_rows.exclude(source=Source.ESTIMATED)
    rows = (
        JobGpuHour.objects.filter(gpu_id__in=own.values("gpu_id"), hour__in=own.values("hour"))
        .exclude(source=Source.ESTIMATED)
        .values("gpu_id", "hour")
        .annotate(jobs=Count("job_id", distinct=True))
        .order_by()
    )
    return {(r["gpu_id"], r["hour"]): r["jobs"] for r in rows}


def job_utilisation_summary(*, job: Job, rows: Iterable[JobGpuHour]) -> JobUtilisation:
    """The job page's summary of how it used its GPUs (apps.jobs.utilisation), from its rows as the page read them
    (their GPUs' nodes joined) and one query for the jobs beside it on each GPU-hour."""
    read = [
        UtilisationRow(
            gpu_id=r.gpu_id, gpu=f"{r.gpu.node.hostname}/{r.gpu.index}", hour=r.hour,
            estimated=r.source == Source.ESTIMATED, energy_j=r.energy_j, sampled_s=r.sampled_s, sm_s=r.sm_s,
            occupancy_s=r.occupancy_s, peak_memory_bytes=r.peak_memory_bytes,
        )
        for r in rows
    ]  # fmt: skip
    return job_utilisation(read, jobs_on_gpu_hour=gpu_hour_job_counts(job=job))


def job_gpu_totals(*, job_ids: Iterable[int]) -> dict[int, list[JobGpuTotals]]:
    """Each job's rows summed per GPU (and source), over all its ingested hours, in one query: the one
    per-job aggregate that the summary, the footprint sums and the findings read."""
    out: dict[int, list[JobGpuTotals]] = defaultdict(list)
    ids = sorted(set(job_ids))
    if not ids:
        return out
    rows = (
        JobGpuHour.objects.filter(job_id__any=ids)
        .values("job_id", "gpu_id", "gpu__uuid", "source")
        .annotate(
            **footprint_sums(),
            sampled_s=exact_sum("sampled_s"),
            sm_s=exact_sum("sm_s"),
            peak_memory_bytes=Max("peak_memory_bytes"),
            job_start=Min("job_start"),
            first_seen=Min("first_seen"),
            last_seen=Max("last_seen"),
            first_hour=Min("hour"),
            last_hour=Max("hour"),
            intensity_estimated=BoolOr("intensity_estimated"),
        )
        .order_by("job_id", "gpu_id", "source")
    )
    for r in rows:
        out[r["job_id"]].append(
            JobGpuTotals(
                gpu_id=r["gpu_id"],
                gpu_uuid=r["gpu__uuid"],
                source=r["source"],
                sampled_s=r["sampled_s"] or 0.0,
                sm_s=r["sm_s"] or 0.0,
                # A key of **footprint_sums(), which the django-stubs plugin cannot see in the row's type.
                occupancy_s=r["occupancy_s"] or 0.0,  # type: ignore[misc]
                peak_memory_bytes=r["peak_memory_bytes"] or 0,
                job_start=r["job_start"],
                first_seen=r["first_seen"],
                last_seen=r["last_seen"],
                first_hour=r["first_hour"],
                last_hour=r["last_hour"],
                footprint=Footprint.from_sums(r),
                intensity_estimated=bool(r["intensity_estimated"]),
            )
        )
    return out


def job_energy_by_method(*, job_ids: Iterable[int]) -> dict[int, dict[str, float]]:
    """Each job's GPU energy per split method (J), over all its hours."""
    energy: dict[int, dict[str, float]] = defaultdict(dict)
    for row in (
        JobGpuHourEnergy.objects.filter(job_id__any=sorted(set(job_ids)))
        .values("job_id", "method")
        .annotate(j=exact_sum("energy_j"))
        .order_by()
    ):
        energy[row["job_id"]][row["method"]] = row["j"]
    return energy


def scheduler_hours(*, job_ids: Iterable[int]) -> tuple[datetime, datetime] | None:
    """The whole hours the jobs' scheduler spans touch, with those of their estimated rows so far (a span
    that shrank leaves estimates behind to remove); None when they have neither."""
    ids = sorted(set(job_ids))
    if not ids:
        return None
    spans = Job.objects.filter(pk__in=ids, scheduler_start__isnull=False).aggregate(
        first=Min("scheduler_start"), last_end=Max("scheduler_end"), last_seen=Max("scheduler_seen_at")
    )
    rows = JobGpuHour.objects.filter(job_id__in=ids, source=Source.ESTIMATED).aggregate(
        first=Min("hour"), last=Max("hour")
    )
    starts = [t for t in (spans["first"], rows["first"]) if t is not None]
    ends = [t for t in (spans["last_end"], spans["last_seen"]) if t is not None]
    ends += [rows["last"] + HOUR] if rows["last"] is not None else []
    if not starts or not ends:
        return None
    start = min(starts).replace(minute=0, second=0, microsecond=0)
    end = max(ends)
    end_hour = end.replace(minute=0, second=0, microsecond=0)
    return start, end_hour if end_hour == end else end_hour + HOUR


def jobs_in_period_footprints(
    *, job_ids: Iterable[int], start: datetime | None, end: datetime | None
) -> dict[int, Footprint]:
    """Each job's part inside [start, end) (an open side where None): its job-GPU-hours there summed in one
    aggregate query, with the cost of its days past retention wholly inside the range (ExpiredJobDay: their hour
    rows are gone, their cost is kept) added in a second. A job with nothing in the range is absent."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    return _period_footprints(Q(job_id__any=ids), start=start, end=end)


def _footprints_by_job(rows: QuerySet[JobGpuHour]) -> dict[int, Footprint]:
    """Each job's rows summed (footprint_sums), as Footprint.from_sums reads them, straight from the cursor's tuples:
    a team's month is 8,000 jobs, whose rows as dicts through the ORM's converters cost more than the query."""
    sums = rows.values("job_id").annotate(**footprint_sums()).order_by()
    try:
        sql, params = sums.query.sql_with_params()
    except EmptyResultSet:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [c.name for c in cursor.description]
        columns = itemgetter(*[names.index(name) for name in ("job_id", *FOOTPRINT_COLUMNS)])
        out = {}
        for row in cursor:
            job_id, energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg, embodied_kg, cost = columns(row)
            out[job_id] = Footprint(
                energy_j=energy_j or 0.0,
                gpu_hours=(occupancy_s or 0.0) / S_PER_HOUR,
                server_kwh=server_kwh or 0.0,
                facility_kwh=facility_kwh or 0.0,
                operational_kg=operational_kg,
                embodied_kg=embodied_kg or 0.0,
                cost=Decimal(cost or 0),
            )
        return out


def _period_footprints(jobs: Q, *, start: datetime | None, end: datetime | None) -> dict[int, Footprint]:
    rows = JobGpuHour.objects.filter(jobs)
    expired = ExpiredJobDay.objects.filter(jobs)
    if start is not None:
        rows = rows.filter(hour__gte=start)
        first = start.astimezone(UTC)
        expired = expired.filter(day__gte=first.date() if first.time() == time(0) else first.date() + timedelta(1))
    if end is not None:
        rows = rows.filter(hour__lt=end)
        expired = expired.filter(day__lt=end.astimezone(UTC).date())
    out = _footprints_by_job(rows)
    for job_id, cost in expired.values("job_id").annotate(c=Sum("cost")).values_list("job_id", "c").order_by():
        out[job_id] = out.get(job_id, Footprint()) + Footprint(cost=cost or Decimal(0))
    return out


def serving_jobs(*, jobs: QuerySet[Job], start: datetime | None, end: datetime | None) -> list[ServingJob]:
    """The jobs of `jobs` that served tokens or requests in [start, end) (an open side where None), each with what it
    served per model (JobWorkHour: the engines' counters, not a job's own work units) and its footprint there
    (jobs_in_period_footprints): what apps.jobs.per_token works from. Three queries."""
    rows = JobWorkHour.objects.filter(job__in=jobs, unit="")
    if start is not None:
        rows = rows.filter(hour__gte=start)
    if end is not None:
        rows = rows.filter(hour__lt=end)
    served: dict[int, dict[str, Served]] = defaultdict(dict)
    for r in (
        rows.values("job_id", "model")
        .annotate(output=Sum("output_tokens"), prompt=Sum("prompt_tokens"), requests=Sum("requests"))
        .order_by()
    ):
        served[r["job_id"]][r["model"]] = Served(r["output"] or 0.0, r["prompt"] or 0.0, r["requests"] or 0.0)
    if not served:
        return []
    footprints = jobs_in_period_footprints(job_ids=served, start=start, end=end)
    meta = Job.objects.filter(pk__in=sorted(served)).values_list("id", "team__name", "cluster__name", "currency")
    return [
        ServingJob(
            job_id=job_id,
            team=team,
            cluster=cluster,
            currency=currency,
            footprint=footprints.get(job_id),
            by_model=served[job_id],
        )
        for job_id, team, cluster, currency in meta.order_by("id")
    ]


def job_work_units(*, job: Job) -> dict[str, float]:
    """The units of the job's own work counter(s) over its whole run, per unit (fleetwatt_job_work_units_total)."""
    rows = job.work_hours.exclude(unit="").values("unit").annotate(units=Sum("units")).order_by("unit")
    return {r["unit"]: r["units"] or 0.0 for r in rows}


def job_days(*, job_ids: Collection[int]) -> dict[int, tuple[int, date, date]]:
    """Each of these jobs' team and its first and last UTC day of hour rows (`Job.first_day`, `last_day`); a job
    without rows, or without a team, is absent."""
    if not job_ids:
        return {}
    rows = Job.objects.filter(
        pk__any=sorted(job_ids), team__isnull=False, first_day__isnull=False, last_day__isnull=False
    ).values_list("pk", "team_id", "first_day", "last_day")
    return {pk: (team_id, first, last) for pk, team_id, first, last in rows.order_by() if first and last}
