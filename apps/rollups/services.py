"""Writes of the stored sums rollups read (teams' daily sums).

Float sums go through `numeric` so that they do not depend on the order Postgres meets the rows in
(apps/core/aggregates.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import connection

from apps.core.aggregates import HALF_EVEN_QR, HALF_EVEN_UNITS
from apps.core.money import DEFAULT_EXPONENT, MINOR_EXPONENTS
from apps.fleet.models import Gpu

from .models import TeamDay

# The clusters' GPUs come as arrays (`gpus`, each with its cluster), not as joins to fleet_gpu and
# fleet_node: without statistics (a month's new partition, a fresh table) Postgres planned those joins as
# nested loops that walked the day's whole index range once per GPU (0.5 s an hour at 1,000 GPUs, growing
# through the day); an array's length is known to the planner, which then hashes it.
_TEAM_DAYS_SQL = """
WITH gpus AS (
    SELECT * FROM unnest(%(gpus)s::bigint[], %(gpu_clusters)s::bigint[]) AS g(id, cluster_id)
), rows AS (  -- summed per job first (numeric: exact, so the sums of sums are the sums), then per team
    SELECT jh.job_id, g.cluster_id, (jh.hour AT TIME ZONE 'UTC')::date AS day, SUM(jh.energy_j::numeric) AS energy_j,
           SUM(jh.occupancy_s::numeric) AS occupancy_s, SUM(jh.facility_kwh::numeric) AS facility_kwh,
           SUM(COALESCE(jh.operational_kg, 0)::numeric) AS operational_kg,
           SUM(jh.embodied_kg::numeric) AS embodied_kg, SUM(jh.cost) AS cost
    FROM jobs_jobgpuhour jh
    JOIN gpus g ON g.id = jh.gpu_id
    WHERE jh.gpu_id = ANY(%(gpus)s::bigint[]) AND (jh.hour AT TIME ZONE 'UTC')::date = ANY(%(days)s)
      AND jh.hour >= %(lo)s AND jh.hour < %(hi)s  -- the days' range: an index range and its partitions only
    GROUP BY jh.job_id, g.cluster_id, day
), methods AS (
    SELECT e.job_id, g.cluster_id, (e.hour AT TIME ZONE 'UTC')::date AS day, e.method,
           SUM(e.energy_j::numeric) AS energy_j
    FROM jobs_jobgpuhourenergy e
    JOIN gpus g ON g.id = e.gpu_id
    WHERE e.gpu_id = ANY(%(gpus)s::bigint[]) AND (e.hour AT TIME ZONE 'UTC')::date = ANY(%(days)s)
      AND e.hour >= %(lo)s AND e.hour < %(hi)s
    GROUP BY e.job_id, g.cluster_id, day, e.method
), team_methods AS (
    SELECT j.team_id, m.cluster_id, m.day, m.method, SUM(m.energy_j)::float8 AS energy_j
    FROM methods m JOIN jobs_job j ON j.id = m.job_id
    WHERE NOT j.excluded_from_bill
    GROUP BY j.team_id, m.cluster_id, m.day, m.method
), by_method AS (
    SELECT team_id, cluster_id, day, jsonb_object_agg(method, energy_j) AS energy_by_method_j
    FROM team_methods GROUP BY team_id, cluster_id, day
), billed AS (  -- each job's day on the bill, with its cost in millionths (m) and its minor unit (d)
    SELECT j.team_id, r.*, j.first_day IS NULL OR j.last_day IS NULL AS undated,
           j.first_day = r.day AND j.last_day = r.day AS within_day, COALESCE(x.e, %(default_exponent)s) AS e,
           (r.cost * 1000000)::bigint AS m, power(10, 6 - COALESCE(x.e, %(default_exponent)s))::bigint AS d
    FROM rows r JOIN jobs_job j ON j.id = r.job_id
    LEFT JOIN unnest(%(codes)s::text[], %(exponents)s::int[]) AS x(code, e) ON x.code = upper(trim(j.currency))
    WHERE NOT j.excluded_from_bill
), rounded AS (SELECT b.*, {half_even_qr} FROM billed b)
INSERT INTO {table} (team_id, cluster_id, day, energy_j, occupancy_s, facility_kwh, operational_kg,
                     embodied_kg, cost, cost_units, units_exponent, energy_by_method_j)
SELECT s.team_id, s.cluster_id, s.day, s.energy_j, s.occupancy_s, s.facility_kwh, s.operational_kg, s.embodied_kg,
       s.cost, s.cost_units, s.units_exponent, COALESCE(m.energy_by_method_j, '{{}}'::jsonb)
FROM (
    SELECT team_id, cluster_id, day, SUM(energy_j)::float8 AS energy_j,
           SUM(occupancy_s)::float8 AS occupancy_s, SUM(facility_kwh)::float8 AS facility_kwh,
           SUM(operational_kg)::float8 AS operational_kg, SUM(embodied_kg)::float8 AS embodied_kg,
           SUM(cost) AS cost,
           -- the jobs within this day, each rounded; not known while a job on it has no days recorded
           CASE WHEN bool_or(undated) THEN NULL
                ELSE COALESCE(SUM({half_even_units}) FILTER (WHERE within_day), 0) END AS cost_units,
           CASE WHEN min(e) FILTER (WHERE within_day) = max(e) FILTER (WHERE within_day)
                THEN min(e) FILTER (WHERE within_day)
                WHEN bool_or(within_day) THEN -1 END AS units_exponent
    FROM rounded
    GROUP BY team_id, cluster_id, day
) s
LEFT JOIN by_method m ON m.team_id = s.team_id AND m.cluster_id = s.cluster_id AND m.day = s.day
"""


CODES = sorted(MINOR_EXPONENTS)

_TEAM_DAYS_LOCK = 0x66770001  # advisory lock namespace: a cluster's teams' daily sums


def team_days_refresh(*, cluster_ids: Iterable[int], days: Iterable[date]) -> None:
    """Rebuild the teams' daily sums of these clusters and days from the job-GPU-hour rows (jobs excluded
    from their team's bill left out), with the rounded costs of the jobs within each day (`Job.first_day` and
    `last_day`, stored before: the derivation's summaries run first)."""
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
    gpus = list(Gpu.objects.filter(node__cluster_id__in=clusters).values_list("pk", "node__cluster_id").order_by())
    with connection.cursor() as cursor:
        lo = datetime(wanted[0].year, wanted[0].month, wanted[0].day, tzinfo=UTC)
        hi = datetime(wanted[-1].year, wanted[-1].month, wanted[-1].day, tzinfo=UTC) + timedelta(days=1)
        cursor.execute(
            _TEAM_DAYS_SQL.format(
                table=TeamDay._meta.db_table, half_even_qr=HALF_EVEN_QR, half_even_units=HALF_EVEN_UNITS
            ),
            {
                "gpus": [g for g, _ in gpus], "gpu_clusters": [c for _, c in gpus], "days": wanted, "lo": lo,
                "hi": hi, "codes": CODES, "exponents": [MINOR_EXPONENTS[c] for c in CODES],
                "default_exponent": DEFAULT_EXPONENT,
            },
        )  # fmt: skip
