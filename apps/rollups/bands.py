"""The energy interval of a sum of job-GPU-hours, in SQL (docs/accuracy.md, "Sums"), for the daily sums and the
rollups read from rows: how far below and above its energy a sum may be.

Each job-GPU-hour's energy by a method has the interval apps.jobs.uncertainty.energy_band gives it (the method's
half-width with the hour's sampling in quadrature, in parts of the energy of every job on that GPU-hour, clipped to
[0, that energy]); one of a method without a band (whole GPU, estimated) is exact. A sum adds its rows' lows and
highs (`bands_sum`: a method's error is a bias that repeats, so the errors add up rather than cancel), so its
interval is [energy - the rows' `below_j`, energy + the rows' `above_j`]: two sums that add up in the database, day by
day and period by period. The same formula as energy_band's, written here in SQL so that a day's rows never leave
the database (tests/rollups/test_energy_bands.py holds it to energy_band, row by row).

What a row's interval needs beside its own energy and method: the energy of every job on its GPU-hour
(telemetry_gpuhour.jobs_energy_j) and the job's seconds sampled there (its measured jobs_jobgpuhour row; an hour's GPU
is the agent's or DCGM's, so there is one). The daily sums read a day's of both once and join them by hash
(`band_inputs_cte`); a rollup of a few rows looks each row's up (`band_joins`)."""

from __future__ import annotations

from apps.jobs.uncertainty import NO_BAND, SHARE_HALF_WIDTH, Z_90

# Methods are the code's own names (apps.jobs.methods), never input, and the widths its own floats: literals.
_HALF_WIDTH = " ".join(f"WHEN '{method}' THEN {width!r}::float8" for method, width in sorted(SHARE_HALF_WIDTH.items()))
NO_BAND_METHODS = "(" + ", ".join(f"'{m}'" for m in sorted(NO_BAND)) + ")"


def band_of(*, energy_j: str, method: str, gpu_jobs_j: str, samples: str) -> str:
    """CROSS JOIN LATERAL clauses that give a row `band.below_j` and `band.above_j`, from the SQL expressions of
    its energy, its method, its GPU-hour's jobs' energy and its seconds sampled (NULL: none). A row of a method
    without a band, or on a GPU-hour whose jobs drew nothing, gives 0 and 0 (exact)."""
    return f"""
    CROSS JOIN LATERAL (  -- e, g, n, the method's bias and the job's share s
        SELECT {energy_j} AS e, COALESCE({gpu_jobs_j}, 0) AS g, COALESCE({samples}, 0) AS n,
               {method} IN {NO_BAND_METHODS} AS exact, CASE {method} {_HALF_WIDTH} END AS bias,
               LEAST(1.0, GREATEST(0.0, {energy_j} / NULLIF({gpu_jobs_j}, 0))) AS s
    ) AS band_in
    CROSS JOIN LATERAL (  -- share_half_width: the bias and the hour's sampling in quadrature; unmeasured: 1
        SELECT CASE WHEN band_in.bias IS NULL THEN 1.0
                    ELSE sqrt(band_in.bias ^ 2 + (CASE WHEN band_in.n >= 1
                                                       THEN {Z_90!r} * sqrt(band_in.s * (1 - band_in.s) / band_in.n)
                                                       ELSE 1.0 END) ^ 2)
               END AS w
    ) AS band_w
    CROSS JOIN LATERAL (  -- energy_band: [max(0, e - w g), min(g, e + w g)], as the parts below and above e
        SELECT CASE WHEN band_in.g <= 0 OR band_in.exact THEN 0.0
                    ELSE band_in.e - GREATEST(0.0, band_in.e - band_w.w * band_in.g) END AS below_j,
               CASE WHEN band_in.g <= 0 OR band_in.exact THEN 0.0
                    ELSE LEAST(band_in.g, band_in.e + band_w.w * band_in.g) - band_in.e END AS above_j
    ) AS band"""


def band_joins(*, energy: str, lo: str, hi: str) -> str:
    """Joins that give each row of `energy` (an alias of jobs_jobgpuhourenergy's rows, or of a query with its
    job_id, gpu_id, hour, method and energy_j) its interval's parts, `band.below_j` and `band.above_j`, looking up
    its GPU-hour and its job's measured row by index; `lo` and `hi`: the placeholders of the rows' hour range
    (their partitions), each in the text twice, in the order lo, hi, lo, hi. The caller keeps only the rows of
    methods with a band (`method NOT IN NO_BAND_METHODS`)."""
    e = energy
    band = band_of(energy_j=f"{e}.energy_j", method=f"{e}.method", gpu_jobs_j="band_gh.jobs_energy_j",
                   samples="band_jh.sampled_s")  # fmt: skip
    return f"""
    LEFT JOIN telemetry_gpuhour band_gh
        ON band_gh.gpu_id = {e}.gpu_id AND band_gh.hour = {e}.hour AND band_gh.hour >= {lo} AND band_gh.hour < {hi}
    LEFT JOIN jobs_jobgpuhour band_jh
        ON band_jh.job_id = {e}.job_id AND band_jh.gpu_id = {e}.gpu_id AND band_jh.hour = {e}.hour
       AND band_jh.source <> 'estimated' AND band_jh.hour >= {lo} AND band_jh.hour < {hi}
    {band}"""


def band_inputs_cte(*, gpus: str, lo: str, hi: str) -> str:
    """CTEs `band_gpu_hours` (each GPU-hour's jobs' energy) and `band_samples` (each job's seconds sampled on a
    GPU-hour) of the GPUs `gpus` (an array's placeholder) in [lo, hi): read once and materialized, so that a day's
    rows are joined to them by hash, not looked up one by one (a day of a 1,000-GPU cluster holds tens of
    thousands of shared rows). To follow a WITH list, with a comma."""
    return f"""band_gpu_hours AS MATERIALIZED (
    SELECT h.gpu_id, h.hour, h.jobs_energy_j FROM telemetry_gpuhour h
    WHERE h.gpu_id = ANY({gpus}::bigint[]) AND h.hour >= {lo} AND h.hour < {hi}
), band_samples AS MATERIALIZED (
    SELECT s.job_id, s.gpu_id, s.hour, s.sampled_s FROM jobs_jobgpuhour s
    WHERE s.gpu_id = ANY({gpus}::bigint[]) AND s.hour >= {lo} AND s.hour < {hi} AND s.source <> 'estimated'
)"""
