"""The per-hour tables' monthly partitions (migration telemetry 0006): made ahead, and dropped past retention.

GPU-hours, job-GPU-hours and their energy by method grow with the fleet (a 10,000-GPU fleet writes ~88 million
GPU-hour rows a year before the per-job ones); everything else fleetwatt keeps is small. Partitioned by UTC
month, a month past `FLEETWATT_HOUR_ROWS_KEEP_MONTHS` is dropped whole (no vacuum, no bloat) while jobs'
totals, teams' daily sums, findings and the audit log stay: the jobs that had rows in it are marked
`rows_expired` first, and the derivation leaves them as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.conf import settings
from django.db import connections, transaction

from apps.jobs.models import Job, JobGpuHour

HOUR_TABLES = ("telemetry_gpuhour", "jobs_jobgpuhour", "jobs_jobgpuhourenergy")

_ensured: set[date] = set()  # months this process knows exist (partitions are never dropped ahead of now)


def month_of(moment: datetime | date) -> date:
    """The first day of the UTC month of `moment`."""
    day = moment.astimezone(UTC).date() if isinstance(moment, datetime) else moment
    return day.replace(day=1)


def months_add(month: date, n: int) -> date:
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def expiry_horizon(*, now: datetime, keep_months: int) -> date | None:
    """The first month kept: months before it are past retention. None: keep everything (0)."""
    if keep_months <= 0:
        return None
    return months_add(month_of(now), -keep_months)


def partitions_ensure(first: date, last: date, *, using: str = "default") -> int:
    """Make the monthly partitions of [first, last] that do not exist yet (moving the default partition's rows
    of those months into them); the number made."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT fleetwatt_hour_partitions_ensure(%s, %s)", [month_of(first), month_of(last)])
        made = int(cursor.fetchone()[0])
    return made


def hour_partition_ensure(hour: datetime) -> None:
    """The hour's month has its partitions (once per process and month: a cheap check on the ingest's path)."""
    month = month_of(hour)
    if month in _ensured:
        return
    partitions_ensure(month, month)
    _ensured.add(month)


def partitions_ahead_ensure(*, now: datetime) -> int:
    """This month's and the next FLEETWATT_HOUR_PARTITIONS_AHEAD_MONTHS' partitions (beat, daily)."""
    first = month_of(now)
    return partitions_ensure(first, months_add(first, settings.FLEETWATT_HOUR_PARTITIONS_AHEAD_MONTHS))


@dataclass(frozen=True)
class Expiry:
    horizon: date
    jobs_frozen: int  # jobs with rows before the horizon, now marked rows_expired
    partitions_dropped: int
    bytes_freed: int


def hour_tables_bytes(*, before: date | None = None, using: str = "default") -> tuple[int, int]:
    """(partitions, bytes on disk with their indexes and TOAST) of the hour tables: every partition, or the monthly
    ones before `before` only."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_inherits i
              JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = ANY(ARRAY[%s, %s, %s]::regclass[])
            """,
            list(HOUR_TABLES),
        )
        sizes = cursor.fetchall()
    total = count = 0
    for name, size in sizes:
        month = name.rsplit("_p", 1)[-1]
        if before is not None:
            if not month.isdigit():
                continue  # the default partition: not dropped by month
            if date(int(month[:4]), int(month[4:]), 1) >= before:
                continue
        total += int(size)
        count += 1
    return count, total


# Each job's cost per cluster and UTC day of the hours about to be dropped, kept for the rollups' costs in minor
# units (ExpiredJobDay). A day is written once: a second expiry (a later horizon) finds the earlier days gone.
_EXPIRED_JOB_DAYS_SQL = """
INSERT INTO jobs_expiredjobday (job_id, cluster_id, day, cost)
SELECT jh.job_id, n.cluster_id, (jh.hour AT TIME ZONE 'UTC')::date AS day, SUM(jh.cost)
FROM jobs_jobgpuhour jh JOIN fleet_gpu g ON g.id = jh.gpu_id JOIN fleet_node n ON n.id = g.node_id
WHERE jh.hour < %s
GROUP BY jh.job_id, n.cluster_id, day
ON CONFLICT (job_id, cluster_id, day) DO NOTHING
"""


def hour_rows_expire(*, horizon: date, dry_run: bool = False, using: str = "default") -> Expiry:
    """Drop the hour rows of the months before `horizon`: first mark the jobs that had some as rows_expired (their
    totals stay as they are) and keep their cost per day (ExpiredJobDay), then drop the months' partitions (as the
    database's owner: `using`)."""
    if horizon != month_of(horizon):
        raise ValueError(f"{horizon} is not the first day of a month.")
    cutoff = datetime(horizon.year, horizon.month, 1, tzinfo=UTC)
    partitions, freed = hour_tables_bytes(before=horizon, using=using)
    jobs = Job.objects.filter(
        pk__in=JobGpuHour.objects.filter(hour__lt=cutoff).values("job_id").distinct(), rows_expired=False
    )
    if dry_run:
        return Expiry(horizon=horizon, jobs_frozen=jobs.count(), partitions_dropped=partitions, bytes_freed=freed)
    with transaction.atomic(using=using):
        frozen = jobs.using(using).update(rows_expired=True)
        with connections[using].cursor() as cursor:
            # Deferred foreign-key checks of rows written earlier in this transaction must not stay pending on
            # a table about to be dropped.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(_EXPIRED_JOB_DAYS_SQL, [cutoff])
            # The work jobs counted in those hours goes with them (a table of its own, not partitioned: small).
            cursor.execute("DELETE FROM jobs_jobworkhour WHERE hour < %s", [cutoff])
            # So do the GPUs' days (the GPU list's sums start at the horizon, as their rows), and the jobs' (a page
            # reads a day past retention as the rows' absence and the day's kept cost, ExpiredJobDay).
            cursor.execute("DELETE FROM rollups_gpuday WHERE day < %s", [horizon])
            cursor.execute("DELETE FROM rollups_jobday WHERE day < %s", [horizon])
            cursor.execute("DELETE FROM rollups_teamlineday WHERE day < %s", [horizon])
            cursor.execute("SELECT fleetwatt_hour_partitions_drop_before(%s)", [horizon])
            dropped = int(cursor.fetchone()[0])
    _ensured.clear()
    return Expiry(horizon=horizon, jobs_frozen=frozen, partitions_dropped=dropped, bytes_freed=freed)
