"""Writes of the stored sums rollups read (teams' daily sums) and of the rollups' cache generation.

Float sums go through `numeric` so that they do not depend on the order Postgres meets the rows in
(apps/core/aggregates.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.core.cache import cache
from django.db import connection, transaction

from .models import TeamDay
from .selectors import ROLLUP_GENERATION_KEY

_TEAM_DAYS_SQL = """
WITH rows AS (
    SELECT j.team_id, n.cluster_id, (jh.hour AT TIME ZONE 'UTC')::date AS day, jh.energy_j, jh.occupancy_s,
           jh.facility_kwh, COALESCE(jh.operational_kg, 0) AS operational_kg, jh.embodied_kg, jh.cost
    FROM jobs_jobgpuhour jh
    JOIN jobs_job j ON j.id = jh.job_id
    JOIN fleet_gpu g ON g.id = jh.gpu_id
    JOIN fleet_node n ON n.id = g.node_id
    WHERE n.cluster_id = ANY(%(clusters)s) AND (jh.hour AT TIME ZONE 'UTC')::date = ANY(%(days)s)
      AND jh.hour >= %(lo)s AND jh.hour < %(hi)s  -- the days' range: an index range and its partitions only
      AND NOT j.excluded_from_bill
), methods AS (
    SELECT j.team_id, n.cluster_id, (e.hour AT TIME ZONE 'UTC')::date AS day, e.method,
           SUM(e.energy_j::numeric)::float8 AS energy_j
    FROM jobs_jobgpuhourenergy e
    JOIN jobs_job j ON j.id = e.job_id
    JOIN fleet_gpu g ON g.id = e.gpu_id
    JOIN fleet_node n ON n.id = g.node_id
    WHERE n.cluster_id = ANY(%(clusters)s) AND (e.hour AT TIME ZONE 'UTC')::date = ANY(%(days)s)
      AND e.hour >= %(lo)s AND e.hour < %(hi)s
      AND NOT j.excluded_from_bill
    GROUP BY j.team_id, n.cluster_id, day, e.method
), by_method AS (
    SELECT team_id, cluster_id, day, jsonb_object_agg(method, energy_j) AS energy_by_method_j
    FROM methods GROUP BY team_id, cluster_id, day
)
INSERT INTO {table} (team_id, cluster_id, day, energy_j, occupancy_s, facility_kwh, operational_kg,
                     embodied_kg, cost, energy_by_method_j)
SELECT s.team_id, s.cluster_id, s.day, s.energy_j, s.occupancy_s, s.facility_kwh, s.operational_kg, s.embodied_kg,
       s.cost, COALESCE(m.energy_by_method_j, '{{}}'::jsonb)
FROM (
    SELECT r.team_id, r.cluster_id, r.day, SUM(r.energy_j::numeric)::float8 AS energy_j,
           SUM(r.occupancy_s::numeric)::float8 AS occupancy_s, SUM(r.facility_kwh::numeric)::float8 AS facility_kwh,
           SUM(r.operational_kg::numeric)::float8 AS operational_kg, SUM(r.embodied_kg::numeric)::float8 AS embodied_kg,
           SUM(r.cost) AS cost
    FROM rows r
    GROUP BY r.team_id, r.cluster_id, r.day
) s
LEFT JOIN by_method m ON m.team_id = s.team_id AND m.cluster_id = s.cluster_id AND m.day = s.day
"""


_TEAM_DAYS_LOCK = 0x66770001  # advisory lock namespace: a cluster's teams' daily sums


def team_days_refresh(*, cluster_ids: Iterable[int], days: Iterable[date]) -> None:
    """Rebuild the teams' daily sums of these clusters and days from the job-GPU-hour rows (jobs excluded
    from their team's bill left out)."""
    clusters, wanted = sorted(set(cluster_ids)), sorted(set(days))
    if not clusters or not wanted:
        return
    with connection.cursor() as cursor:
        # Two ingests of one cluster's hours of one day would both delete and re-insert the same rows (the
        # second's insert then breaks the unique key): one at a time per cluster, until commit, taken in
        # the order of the ids so that two writers of several clusters cannot wait on each other.
        for cluster_id in clusters:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_TEAM_DAYS_LOCK, cluster_id])
    TeamDay.objects.filter(cluster_id__in=clusters, day__in=wanted).delete()
    with connection.cursor() as cursor:
        lo = datetime(wanted[0].year, wanted[0].month, wanted[0].day, tzinfo=UTC)
        hi = datetime(wanted[-1].year, wanted[-1].month, wanted[-1].day, tzinfo=UTC) + timedelta(days=1)
        cursor.execute(
            _TEAM_DAYS_SQL.format(table=TeamDay._meta.db_table),
            {"clusters": clusters, "days": wanted, "lo": lo, "hi": hi},
        )


def rollups_invalidate() -> None:
    """Every cached rollup is stale: called whenever job rows, footprints or decisions change. Bumped now
    (a reader inside this transaction must not see the old figures) and again when it commits (a reader
    outside it must not keep figures computed from the rows before the commit)."""
    _generation_bump()
    transaction.on_commit(_generation_bump)


def _generation_bump() -> None:
    try:
        cache.incr(ROLLUP_GENERATION_KEY)
    except ValueError:
        cache.set(ROLLUP_GENERATION_KEY, 1, timeout=None)
