"""The fleet page's heatmap: each GPU's mean power per hour of the period (GPUs as rows, time as columns), from
the GPU-hours alone, in one query for the grid (and one for its GPUs' names) whatever the number of GPUs.

Power, not SM utilisation: the GPU-hour rows hold each GPU's energy, and a GPU's SM time would be a sum over its
jobs' rows (a second, larger table) on every load of the page. Mean power shows an idle GPU as plainly (an H200
idles near 75 W and computes at several hundred), and each cell also says what share of the hour jobs held it.

Bounded: at most MAX_COLUMNS columns (hours, else days, else weeks, from the period's start) and MAX_GPUS rows
(over that, the GPUs that drew the least on average: the idle ones are what the page is for); the grid is kept in
the cache at the data's generation (apps.core.kept), so a change of the figures is seen at once."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.urls import reverse

from apps.core.kept import gpu_power_grid_key, kept_or_computed
from apps.core.units.footprint import S_PER_HOUR
from apps.fleet.models import Gpu
from apps.rollups.ranges import whole_days
from apps.telemetry.models import GpuHour

MAX_COLUMNS = 168  # a week of hours
MAX_GPUS = 128  # 18 px a row: a chart of 2,300 px at most
KEPT_S = 3600  # a period's grid, at one generation: a new ingest or edit makes the next one anyway
BUCKETS = (timedelta(hours=1), timedelta(days=1), timedelta(days=7))


def heatmap_bucket(start: datetime, end: datetime) -> timedelta:
    """The shortest of an hour, a day and a week that keeps the period within MAX_COLUMNS columns."""
    for bucket in BUCKETS:
        if (end - start) / bucket <= MAX_COLUMNS:
            return bucket
    return BUCKETS[-1]


def _grid_sql(bucket: timedelta) -> str:
    # `kept` ranks the GPUs of the period by their mean power (the window counts them all before the LIMIT), so that
    # over MAX_GPUS the grid is the least-drawing GPUs' whole rows. Each cell comes out
    # as the page shows it, its column's index and its figures rounded (a week of hours at MAX_GPUS is 21,504 cells:
    # Python's arithmetic and datetimes per cell cost more than the query): mean power, W = J / (hours x 3,600 s);
    # held by jobs, % = occupied seconds / the hours' seconds. Sorted by ids: the names are read apart, for at most
    # MAX_GPUS GPUs, not repeated on every cell. The column from the hour's offset in seconds as a float (exact for
    # whole seconds; extract()'s numeric costs more per row).
    bucket_s = int(bucket.total_seconds())
    table = f'"{GpuHour._meta.db_table}"'
    kept = (
        f"SELECT gpu_id, count(*) OVER () AS gpus FROM {table} WHERE hour >= %(start)s AND hour < %(end)s "
        "GROUP BY gpu_id ORDER BY avg(device_energy_j), gpu_id LIMIT %(max_gpus)s"
    )
    # Joined by a hash on the GPU over the period's hours, read in order: by the (GPU, hour) key, each GPU's hours
    # are on as many pages as hours (the ingest writes an hour of every GPU at a time), and measured slower.
    return f"""
        SELECT h.gpu_id, k.gpus, floor(date_part('epoch', h.hour - %(start)s) / {bucket_s})::int AS col,
               round(sum(h.device_energy_j) / (count(*) * 3600.0))::int,
               round(least(100.0, 100.0 * sum(h.occupied_s) / (count(*) * 3600.0)))::int,
               count(*)
        FROM ({kept}) k JOIN {table} h ON h.gpu_id = k.gpu_id AND h.hour >= %(start)s AND h.hour < %(end)s
        GROUP BY 1, 2, 3
        ORDER BY 1, 3
    """


# A week of hours over whole UTC days, from each GPU's days (GpuDay: its hours of the day with their own figures), not
# the week's GPU-hour rows: the GPUs ranked by their mean power over the period (exact, in numeric), then a row per GPU
# and day with its hours' columns and figures, each worked out by the same expressions as the rows' (a bucket of one
# hour holds one GPU-hour).
_DAYS_SQL = """
WITH kept AS (
    SELECT gpu_id, count(*) OVER () AS gpus FROM rollups_gpuday WHERE day >= %(first)s AND day < %(after)s
    GROUP BY gpu_id ORDER BY SUM(device_energy_j::numeric) / SUM(hours), gpu_id LIMIT %(max_gpus)s
)
SELECT d.gpu_id, k.gpus, (d.day - %(first)s) * 24, d.hours_of_day,
       ARRAY(SELECT round(x.device_j / (1::bigint * 3600.0))::int
             FROM unnest(d.hour_device_energy_j) WITH ORDINALITY AS x(device_j, n) ORDER BY x.n),
       ARRAY(SELECT round(least(100.0, 100.0 * x.occupied_s / (1::bigint * 3600.0)))::int
             FROM unnest(d.hour_occupied_s) WITH ORDINALITY AS x(occupied_s, n) ORDER BY x.n)
FROM kept k JOIN rollups_gpuday d ON d.gpu_id = k.gpu_id AND d.day >= %(first)s AND d.day < %(after)s
"""

Cells = dict[int, dict[str, list[Any]]]


def _cells_read(start: datetime, end: datetime, bucket: timedelta, columns: int) -> tuple[Cells, int]:
    """Each GPU's row of the grid (its mean power, share held and hours ingested per column, None where no hour), and
    how many GPUs had an hour in the period: from the GPUs' days for hours over whole UTC days, else from the
    GPU-hours."""
    cells: Cells = {}

    def row_of(gpu_id: int) -> dict[str, list[Any]]:
        row = cells.get(gpu_id)
        if row is None:
            row = cells[gpu_id] = {k: [None] * columns for k in ("power_w", "held_pct", "hours")}
        return row

    days = whole_days(start, end)
    with connection.cursor() as cursor:
        if days is not None and bucket == BUCKETS[0]:
            cursor.execute(_DAYS_SQL, {"first": days[0], "after": days[1], "max_gpus": MAX_GPUS})
            found = cursor.fetchall()
            for gpu_id, _gpus, base, hours_of_day, power_w, held_pct in found:
                row = row_of(gpu_id)
                power, held, hours = row["power_w"], row["held_pct"], row["hours"]
                for h, w, pct in zip(hours_of_day, power_w, held_pct, strict=True):
                    power[base + h], held[base + h], hours[base + h] = w, pct, 1
        else:
            cursor.execute(_grid_sql(bucket), {"start": start, "end": end, "max_gpus": MAX_GPUS})
            found = cursor.fetchall()
            for gpu_id, _gpus, i, power_w, held_pct, hours_in in found:
                row = row_of(gpu_id)
                row["power_w"][i], row["held_pct"][i], row["hours"][i] = power_w, held_pct, hours_in
    return cells, found[0][1] if found else 0


def gpu_power_grid(*, start: datetime, end: datetime) -> dict[str, Any]:
    """The heatmap's figures for the page's script (json_script): the columns' starts, and per GPU (in the order of
    their clusters, hosts and indices) its name, its page and per column its mean power (W), the share of the time
    jobs held it (%) and the hours ingested (None where none was). For admins and finance: every team's GPUs. Two
    queries: the grid, and the names of its GPUs; kept at the data's generation."""
    return kept_or_computed(gpu_power_grid_key(start, end), lambda: _grid(start, end), KEPT_S).value


def _grid(start: datetime, end: datetime) -> dict[str, Any]:
    bucket = heatmap_bucket(start, end)
    columns = []
    at = start
    while at < end:
        columns.append(at)
        at += bucket
    cells, gpus = _cells_read(start, end, bucket, len(columns))
    period = f"?start={start.date().isoformat()}&end={end.date().isoformat()}"
    named = Gpu.objects.filter(pk__in=list(cells)).order_by("node__cluster__name", "node__hostname", "index", "pk")
    grid = {
        "columns": [c.isoformat() for c in columns],
        "bucket_h": round(bucket.total_seconds() / S_PER_HOUR),
        "rows": [
            {
                "name": f"{cluster} · {hostname}/{gpu_index}",
                "url": reverse("dashboard:gpu", args=[gpu_id]) + period,
                **cells[gpu_id],
            }
            for gpu_id, cluster, hostname, gpu_index in named.values_list(
                "pk", "node__cluster__name", "node__hostname", "index"
            )
        ],
        # Every GPU with an hour in the period; `rows` holds at most MAX_GPUS of them.
        "gpus": gpus,
        "max_gpus": MAX_GPUS,
    }
    return grid
