"""Writes of the stored sums rollups read (the daily sums of teams, clusters and job groups, and of each GPU).

Float sums go through `numeric` so that they do not depend on the order Postgres meets the rows in
(apps/core/units/aggregates.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import connection

from apps.core import locks
from apps.core.units.aggregates import HALF_EVEN_QR, HALF_EVEN_UNITS
from apps.core.units.footprint import Footprint
from apps.core.units.money import DEFAULT_EXPONENT, MINOR_EXPONENTS
from apps.fleet.models import Gpu, Team
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste

from .bands import NO_BAND_METHODS, band_inputs_cte, band_of
from .models import ClusterDay, GpuDay, JobDay, JobGroupDay, TeamDay, TeamLineDay, TeamWasteDay

# The clusters' GPUs come as arrays (`gpus`, each with its cluster), not as joins to fleet_gpu and
# fleet_node: without statistics (a month's new partition, a fresh table) Postgres planned those joins as
# nested loops that walked the day's whole index range once per GPU (0.5 s an hour at 1,000 GPUs, growing
# through the day); an array's length is known to the planner, which then hashes it.
# The sums of a day per team (billed jobs), per cluster (all jobs, and its GPU-hours) and per job group, from one
# read of the day's rows: each job's rows summed first (numeric: exact, so the sums of sums are the sums), then
# the jobs; with the rounded costs of the jobs within the day (`rounded`: m, its cost in millionths, d, its
# minor unit in millionths, q and r from them).
_DAY_SUMS = f"""
SUM(energy_j)::float8 AS energy_j, SUM(occupancy_s)::float8 AS occupancy_s,
SUM(facility_kwh)::float8 AS facility_kwh, SUM(operational_kg)::float8 AS operational_kg,
SUM(embodied_kg)::float8 AS embodied_kg, SUM(cost) AS cost,
-- the jobs within this day, each rounded; not known while a job on it has no days recorded
CASE WHEN bool_or(undated) THEN NULL
     ELSE COALESCE(SUM({HALF_EVEN_UNITS}) FILTER (WHERE within_day), 0) END AS cost_units,
CASE WHEN min(e) FILTER (WHERE within_day) = max(e) FILTER (WHERE within_day) THEN min(e) FILTER (WHERE within_day)
     WHEN bool_or(within_day) THEN -1 END AS units_exponent,
-- the interval of energy_j: its rows' parts below and above it added up (apps.rollups.bands)
(SUM(energy_j) - SUM(below_j))::float8 AS energy_low_j, (SUM(energy_j) + SUM(above_j))::float8 AS energy_high_j
"""

_DAY_COLUMNS = (
    "day, energy_j, occupancy_s, facility_kwh, operational_kg, embodied_kg, cost, cost_units, units_exponent, "
    "energy_low_j, energy_high_j"
)


def _by_method(keys: str, where: str) -> str:
    """Each key's energy per method as JSON, from `job_methods`."""
    return f"""(
        SELECT {keys}, day, jsonb_object_agg(method, energy_j) AS energy_by_method_j FROM (
            SELECT {keys}, day, method, SUM(energy_j)::float8 AS energy_j FROM job_methods WHERE {where}
            GROUP BY {keys}, day, method
        ) AS per_method GROUP BY {keys}, day
    )"""


def _days_insert(table: str, keys: str, where: str) -> str:
    """INSERT of `table`'s days per `keys` and day from `rounded` and `job_methods`, the rows `where` holds."""
    joined = " AND ".join(f"bm.{k.strip()} = s.{k.strip()}" for k in keys.split(","))
    return f"""INSERT INTO {table} ({keys}, {_DAY_COLUMNS}, energy_by_method_j)
    SELECT s.*, COALESCE(bm.energy_by_method_j, '{{}}'::jsonb)
    FROM (SELECT {keys}, day, {_DAY_SUMS} FROM rounded WHERE {where} GROUP BY {keys}, day) AS s
    LEFT JOIN {_by_method(keys, where)} AS bm ON {joined} AND bm.day = s.day"""


# The clusters' GPUs come as arrays (`gpus`, each with its cluster), not as joins to fleet_gpu and
# fleet_node: without statistics (a month's new partition, a fresh table) Postgres planned those joins as
# nested loops that walked the day's whole index range once per GPU (0.5 s an hour at 1,000 GPUs, growing
# through the day); an array's length is known to the planner, which then hashes it. One statement: the
# teams' and the job groups' inserts are data-modifying CTEs beside the clusters'.
_DAY_SUMS_SQL = f"""
WITH gpus AS (
    SELECT * FROM unnest(%(gpus)s::bigint[], %(gpu_clusters)s::bigint[]) AS g(id, cluster_id)
), rows AS (
    SELECT jh.job_id, g.cluster_id, (jh.hour AT TIME ZONE 'UTC')::date AS day, SUM(jh.energy_j::numeric) AS energy_j,
           SUM(jh.occupancy_s::numeric) AS occupancy_s, SUM(jh.facility_kwh::numeric) AS facility_kwh,
           SUM(COALESCE(jh.operational_kg, 0)::numeric) AS operational_kg,
           SUM(jh.embodied_kg::numeric) AS embodied_kg, SUM(jh.cost) AS cost,
           -- (each job's own day, JobDay: its server energy, and its operational CO2e unknown where every row's is)
           SUM(jh.server_kwh::numeric) AS server_kwh, SUM(jh.operational_kg::numeric) AS operational_kg_known
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
), {band_inputs_cte(gpus="%(gpus)s", lo="%(lo)s", hi="%(hi)s")},
bands AS (  -- each job's day on shared GPUs: how far below and above its energy the rows' intervals reach
    SELECT e.job_id, g.cluster_id, (e.hour AT TIME ZONE 'UTC')::date AS day,
           SUM(band.below_j::numeric) AS below_j, SUM(band.above_j::numeric) AS above_j
    FROM jobs_jobgpuhourenergy e
    JOIN gpus g ON g.id = e.gpu_id
    LEFT JOIN band_gpu_hours bh ON bh.gpu_id = e.gpu_id AND bh.hour = e.hour
    LEFT JOIN band_samples bs ON bs.job_id = e.job_id AND bs.gpu_id = e.gpu_id AND bs.hour = e.hour
    {band_of(energy_j="e.energy_j", method="e.method", gpu_jobs_j="bh.jobs_energy_j", samples="bs.sampled_s")}
    -- (the days asked for are kept by the join to their rows: a filter on the day's expression here made the
    -- planner expect a few rows, and look each one's GPU-hour up by index)
    WHERE e.gpu_id = ANY(%(gpus)s::bigint[]) AND e.hour >= %(lo)s AND e.hour < %(hi)s
      AND e.method NOT IN {NO_BAND_METHODS}
    GROUP BY e.job_id, g.cluster_id, day
), job_methods AS (
    SELECT j.team_id, j.job_group_id, NOT j.excluded_from_bill AS billed, m.cluster_id, m.day, m.method, m.energy_j
    FROM methods m JOIN jobs_job j ON j.id = m.job_id
), priced AS (  -- each job's day with its cost in millionths (m) and its minor unit (d)
    SELECT j.team_id, j.job_group_id, NOT j.excluded_from_bill AS billed, j."user", j.currency, r.*,
           j.first_day IS NULL OR j.last_day IS NULL AS undated,
           j.first_day = r.day AND j.last_day = r.day AS within_day, COALESCE(x.e, %(default_exponent)s) AS e,
           (r.cost * 1000000)::bigint AS m, power(10, 6 - COALESCE(x.e, %(default_exponent)s))::bigint AS d,
           COALESCE(b.below_j, 0) AS below_j, COALESCE(b.above_j, 0) AS above_j
    FROM rows r JOIN jobs_job j ON j.id = r.job_id
    LEFT JOIN unnest(%(codes)s::text[], %(exponents)s::int[]) AS x(code, e) ON x.code = upper(trim(j.currency))
    LEFT JOIN bands b ON b.job_id = r.job_id AND b.cluster_id = r.cluster_id AND b.day = r.day
), rounded AS (SELECT p.*, {HALF_EVEN_QR} FROM priced p
), job_days AS (  -- each job's day as it is, whatever its bill, with its lines (JobDay): what a team's page reads
    INSERT INTO rollups_jobday (job_id, team_id, cluster_id, day, "user", job_group_id, billed, currency,
                                within_day, energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg,
                                embodied_kg, cost, cost_booked)
    SELECT job_id, team_id, cluster_id, day, "user", job_group_id, billed, currency, COALESCE(within_day, FALSE),
           energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg_known, embodied_kg, cost,
           CASE WHEN within_day THEN round(({HALF_EVEN_UNITS})::numeric / power(10::numeric, e), e) END
    FROM rounded
    ORDER BY team_id, day, job_id  -- a team's days side by side on disk: what a page of a month reads
    RETURNING 1
), team_line_days AS (  -- the jobs on a bill within one day, per line of their team's splits (TeamLineDay)
    INSERT INTO rollups_teamlineday (team_id, cluster_id, day, "user", job_group_id, currency, jobs, cost_booked,
                                     energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg, embodied_kg,
                                     cost)
    SELECT team_id, cluster_id, day, "user", job_group_id, currency, count(*),
           SUM(round(({HALF_EVEN_UNITS})::numeric / power(10::numeric, e), e)), SUM(energy_j), SUM(occupancy_s),
           SUM(server_kwh), SUM(facility_kwh), SUM(operational_kg_known), SUM(embodied_kg), SUM(cost)
    FROM rounded WHERE within_day AND billed
    GROUP BY team_id, cluster_id, day, "user", job_group_id, currency
    RETURNING 1
), team_days AS (
    {_days_insert("rollups_teamday", "team_id, cluster_id", "billed")}
    RETURNING 1
), job_group_days AS (
    {_days_insert("rollups_jobgroupday", "job_group_id, cluster_id", "job_group_id IS NOT NULL")}
    RETURNING 1
), gpu_day_rows AS (  -- each GPU's day of GPU-hours, summed exactly (numeric): its own day and its cluster's
    SELECT h.gpu_id, g.cluster_id, (h.hour AT TIME ZONE 'UTC')::date AS day, count(*) AS hours,
           -- each hour's own figures, for the fleet page's heatmap (GpuDay)
           array_agg(extract(hour FROM h.hour AT TIME ZONE 'UTC')::smallint ORDER BY h.hour) AS hours_of_day,
           array_agg(h.device_energy_j ORDER BY h.hour) AS hour_device_j,
           array_agg(h.occupied_s ORDER BY h.hour) AS hour_occupied_s,
           SUM(h.device_energy_j::numeric) AS device_j, SUM(h.jobs_energy_j::numeric) AS jobs_j,
           SUM(h.idle_energy_j::numeric) AS idle_j, SUM(h.unobserved_j::numeric) AS unobserved_j,
           SUM(h.estimated_j::numeric) AS estimated_j,
           SUM(h.occupied_s::numeric) AS occupied_s, SUM(h.estimated_s::numeric) AS estimated_s,
           SUM(h.idle_facility_kwh::numeric) AS idle_facility_kwh,
           SUM(h.idle_operational_kg::numeric) AS idle_operational_kg,
           SUM(h.idle_embodied_kg::numeric) AS idle_embodied_kg, SUM(h.idle_cost) AS idle_cost,
           SUM(h.unseen_j::numeric) AS unseen_j, SUM(h.unseen_s::numeric) AS unseen_s,
           SUM(h.unseen_facility_kwh::numeric) AS unseen_facility_kwh,
           SUM(h.unseen_operational_kg::numeric) AS unseen_operational_kg,
           SUM(h.unseen_embodied_kg::numeric) AS unseen_embodied_kg, SUM(h.unseen_cost) AS unseen_cost
    FROM telemetry_gpuhour h
    JOIN gpus g ON g.id = h.gpu_id
    WHERE h.gpu_id = ANY(%(gpus)s::bigint[]) AND (h.hour AT TIME ZONE 'UTC')::date = ANY(%(days)s)
      AND h.hour >= %(lo)s AND h.hour < %(hi)s
    GROUP BY h.gpu_id, g.cluster_id, day
), gpu_days AS (  -- what the GPU list reads (GpuDay)
    INSERT INTO rollups_gpuday (gpu_id, day, hours, device_energy_j, jobs_energy_j, idle_energy_j, unobserved_j,
                                estimated_j, occupied_s, estimated_s, hours_of_day, hour_device_energy_j,
                                hour_occupied_s)
    SELECT gpu_id, day, hours, device_j::float8, jobs_j::float8, idle_j::float8, unobserved_j::float8,
           estimated_j::float8, occupied_s::float8, estimated_s::float8, hours_of_day, hour_device_j, hour_occupied_s
    FROM gpu_day_rows
    RETURNING 1
), idle AS (  -- the GPU-hours' sums a cluster's idle line is worked out from
    SELECT cluster_id, day,
           SUM(device_j)::float8 AS device_j, SUM(jobs_j)::float8 AS jobs_j,
           SUM(estimated_j)::float8 AS estimated_j, SUM(hours) AS gpu_hours_total,
           SUM(occupied_s)::float8 AS occupied_s, SUM(estimated_s)::float8 AS estimated_s,
           SUM(idle_facility_kwh)::float8 AS idle_facility_kwh,
           COALESCE(SUM(idle_operational_kg), 0)::float8 AS idle_operational_kg,
           SUM(idle_embodied_kg)::float8 AS idle_embodied_kg, SUM(idle_cost) AS idle_cost,
           SUM(unseen_j)::float8 AS unseen_j, SUM(unseen_s)::float8 AS unseen_s,
           SUM(unseen_facility_kwh)::float8 AS unseen_facility_kwh,
           COALESCE(SUM(unseen_operational_kg), 0)::float8 AS unseen_operational_kg,
           SUM(unseen_embodied_kg)::float8 AS unseen_embodied_kg, SUM(unseen_cost) AS unseen_cost
    FROM gpu_day_rows
    GROUP BY cluster_id, day
)
INSERT INTO rollups_clusterday (cluster_id, {_DAY_COLUMNS}, energy_by_method_j, device_j, jobs_j, estimated_j,
                                gpu_hours_total, occupied_s, estimated_s, idle_facility_kwh, idle_operational_kg,
                                idle_embodied_kg, idle_cost, unseen_j, unseen_s, unseen_facility_kwh,
                                unseen_operational_kg, unseen_embodied_kg, unseen_cost)
SELECT COALESCE(s.cluster_id, i.cluster_id), COALESCE(s.day, i.day), COALESCE(s.energy_j, 0),
       COALESCE(s.occupancy_s, 0), COALESCE(s.facility_kwh, 0), COALESCE(s.operational_kg, 0),
       COALESCE(s.embodied_kg, 0), COALESCE(s.cost, 0), CASE WHEN s.day IS NULL THEN 0 ELSE s.cost_units END,
       s.units_exponent, COALESCE(s.energy_low_j, 0), COALESCE(s.energy_high_j, 0),
       COALESCE(bm.energy_by_method_j, '{{}}'::jsonb), COALESCE(i.device_j, 0),
       COALESCE(i.jobs_j, 0), COALESCE(i.estimated_j, 0), COALESCE(i.gpu_hours_total, 0), COALESCE(i.occupied_s, 0),
       COALESCE(i.estimated_s, 0), COALESCE(i.idle_facility_kwh, 0), COALESCE(i.idle_operational_kg, 0),
       COALESCE(i.idle_embodied_kg, 0), COALESCE(i.idle_cost, 0), COALESCE(i.unseen_j, 0), COALESCE(i.unseen_s, 0),
       COALESCE(i.unseen_facility_kwh, 0), COALESCE(i.unseen_operational_kg, 0), COALESCE(i.unseen_embodied_kg, 0),
       COALESCE(i.unseen_cost, 0)
FROM (SELECT cluster_id, day, {_DAY_SUMS} FROM rounded GROUP BY cluster_id, day) AS s
FULL JOIN idle i ON i.cluster_id = s.cluster_id AND i.day = s.day
LEFT JOIN {_by_method("cluster_id", "TRUE")} AS bm
    ON bm.cluster_id = COALESCE(s.cluster_id, i.cluster_id) AND bm.day = COALESCE(s.day, i.day)
"""


CODES = sorted(MINOR_EXPONENTS)


def _locks_take(namespace: int, ids: list[int]) -> None:
    """The transaction's advisory locks (namespace, id) on each id, in the order of the ids (sorted by the caller), so
    that two writers of several cannot wait on each other."""
    with connection.cursor() as cursor:
        for pk in ids:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [namespace, pk])


def day_sums_refresh(*, cluster_ids: Iterable[int], days: Iterable[date]) -> None:
    """Rebuild the daily sums of these clusters and days from the job-GPU-hour and GPU-hour rows: the teams'
    (jobs excluded from their team's bill left out), the clusters', the job groups', their GPUs' and each job's
    (JobDay), with the rounded costs of the jobs within each day (`Job.first_day` and `last_day`, stored before: the
    derivation's summaries run first)."""
    clusters, wanted = sorted(set(cluster_ids)), sorted(set(days))
    if not clusters or not wanted:
        return
    # Two ingests of one cluster's hours of one day would both delete and re-insert the same rows (the second's
    # insert then breaks the unique key): one at a time per cluster, until commit.
    _locks_take(locks.DAY_SUMS, clusters)
    for model in (TeamDay, ClusterDay, JobGroupDay, JobDay, TeamLineDay):
        model.objects.filter(cluster_id__in=clusters, day__in=wanted).delete()
    gpus = list(Gpu.objects.filter(node__cluster_id__in=clusters).values_list("pk", "node__cluster_id").order_by())
    GpuDay.objects.filter(gpu_id__any=[g for g, _ in gpus], day__in=wanted).delete()
    with connection.cursor() as cursor:
        lo = datetime(wanted[0].year, wanted[0].month, wanted[0].day, tzinfo=UTC)
        hi = datetime(wanted[-1].year, wanted[-1].month, wanted[-1].day, tzinfo=UTC) + timedelta(days=1)
        cursor.execute(
            _DAY_SUMS_SQL,
            {
                "gpus": [g for g, _ in gpus], "gpu_clusters": [c for _, c in gpus], "days": wanted, "lo": lo,
                "hi": hi, "codes": CODES, "exponents": [MINOR_EXPONENTS[c] for c in CODES],
                "default_exponent": DEFAULT_EXPONENT,
            },
        )  # fmt: skip


def team_waste_days_refresh(*, team_ids: Iterable[int], days: Iterable[date]) -> None:
    """Rebuild these teams' waste on these UTC days (TeamWasteDay): period_waste over the days' span, each day's part
    as the rollup of a period holding it would count it (the union of the counted findings' rows of that day)."""
    teams, wanted = sorted(set(team_ids)), sorted(set(days))
    if not teams or not wanted:
        return
    # As day_sums_refresh: two derivations touching one team's days (two clusters' ingests) one after the other;
    # taken after the clusters' day sums' locks by every caller.
    _locks_take(locks.WASTE_DAYS, teams)
    TeamWasteDay.objects.filter(team_id__in=teams, day__in=wanted).delete()
    start = datetime(wanted[0].year, wanted[0].month, wanted[0].day, tzinfo=UTC)
    end = datetime(wanted[-1].year, wanted[-1].month, wanted[-1].day, tzinfo=UTC) + timedelta(days=1)
    kept = set(wanted)
    rows = []
    for team in Team.objects.filter(pk__in=teams).order_by("pk"):
        # Every counted finding of the team's jobs whose days reach the span (period_waste keeps those): a job's
        # rows on a day count there however long before it was last seen (a scheduler's estimate after it).
        found = period_waste(flags=counted_flags(Flag.objects.filter(job__team=team)), start=start, end=end)
        rows += [_waste_day(team.pk, day, part) for day, part in sorted(found.per_day.items()) if day in kept]
    TeamWasteDay.objects.bulk_create(rows)


def _waste_day(team_id: int, day: date, part: Footprint) -> TeamWasteDay:
    return TeamWasteDay(
        team_id=team_id, day=day, energy_j=part.energy_j, gpu_hours=part.gpu_hours, server_kwh=part.server_kwh,
        facility_kwh=part.facility_kwh, operational_kg=part.operational_kg, embodied_kg=part.embodied_kg,
        cost=part.cost,
    )  # fmt: skip
