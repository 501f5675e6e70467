"""The energy interval in SQL (apps/rollups/bands.py): band_of gives each row apps.jobs.uncertainty.energy_band's
interval as the parts below and above its energy, exact rows (a method without a band, a GPU-hour whose jobs drew
nothing) at 0 and 0, never below 0 nor above the GPU's jobs' energy; band_inputs_cte reads the GPUs' hours in the
range only, and the samples of measured rows only; band_joins looks up GPU-hours of the range it is given only.
Rows of a real fleet against energy_band: tests/rollups/test_energy_bands.py."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection

from apps.jobs.methods import Method
from apps.jobs.uncertainty import NO_BAND, energy_band
from apps.rollups.bands import NO_BAND_METHODS, band_inputs_cte, band_joins, band_of
from tests.factories import HOUR, T0, GpuFactory, GpuHourFactory, JobFactory, JobGpuHourEnergyFactory, JobGpuHourFactory

G = 1.8e6  # the GPU's jobs' energy in the hour


def test_the_methods_without_a_band_are_named_in_sql_as_in_python() -> None:
    assert NO_BAND_METHODS == "('estimated', 'whole_gpu')"
    assert {m.strip(" '") for m in NO_BAND_METHODS.strip("()").split(",")} == set(NO_BAND)


@pytest.mark.django_db
def test_band_of_is_energy_bands_interval_for_every_method_share_and_sampling() -> None:
    # given rows of every method, share of the GPU's jobs' energy (none, a part, all), GPU-hour and sampling
    cases = list(itertools.product(
        [m.value for m in Method], [0.0, 1.0e5, 9.0e5, G], [G, 0.0, None], [None, 0.0, 0.5, 1.0, 60.0, 3600.0],
    ))  # fmt: skip
    values = ", ".join(["(%s, %s::text, %s::float8, %s::float8, %s::float8)"] * len(cases))
    band = band_of(energy_j="r.e", method="r.m", gpu_jobs_j="r.g", samples="r.n")
    sql = f"SELECT r.k, band.below_j, band.above_j FROM (VALUES {values}) AS r(k, m, e, g, n) {band} ORDER BY r.k"
    with connection.cursor() as cursor:
        cursor.execute(sql, [v for k, case in enumerate(cases) for v in (k, *case)])
        found = cursor.fetchall()
    # then each is energy_band's, as the parts below and above the energy, within [0, the GPU's jobs' energy]
    assert len(found) == len(cases)
    for (_, below, above), (method, e, g, n) in zip(found, cases, strict=True):
        expected = energy_band(energy_j=e, gpu_jobs_j=g or 0.0, method=method, samples=n or 0.0)
        parts = (0.0, 0.0) if expected is None else (e - expected[0], expected[1] - e)
        assert (below, above) == pytest.approx(parts, rel=1e-9, abs=1e-6), (method, e, g, n)
        assert 0.0 <= below <= e + 1e-6 and 0.0 <= above <= max(0.0, (g or 0.0) - e) + 1e-6
        if method in NO_BAND or not g:
            assert (below, above) == (0.0, 0.0)


@pytest.mark.django_db
def test_the_inputs_are_the_listed_gpus_hours_in_the_range_and_the_measured_rows_samples() -> None:
    # given two GPUs asked for, one not, with hours inside and after the range; a measured and an estimated row
    job, estimate = JobFactory(), JobFactory()
    asked = [GpuFactory(node__cluster=job.cluster) for _ in range(2)]
    other = GpuFactory(node__cluster=job.cluster)
    for gpu, hour in [(asked[0], T0), (asked[0], T0 + HOUR), (asked[0], T0 + 2 * HOUR), (asked[1], T0), (other, T0)]:
        GpuHourFactory(gpu=gpu, hour=hour)
    JobGpuHourFactory(job=job, gpu=asked[0], hour=T0, sampled_s=3000.0)
    JobGpuHourFactory(job=estimate, gpu=asked[0], hour=T0, source="estimated", sampled_s=0.0)
    JobGpuHourFactory(job=job, gpu=other, hour=T0)
    # when the inputs of [T0, T0 + 2 h) are read for the GPUs asked for
    sql = f"""WITH {band_inputs_cte(gpus="%(gpus)s", lo="%(lo)s", hi="%(hi)s")}
    SELECT 'hour', gpu_id, NULL, hour FROM band_gpu_hours
    UNION ALL SELECT 'samples', gpu_id, job_id, hour FROM band_samples"""
    with connection.cursor() as cursor:
        cursor.execute(sql, {"gpus": [g.pk for g in asked], "lo": T0, "hi": T0 + 2 * HOUR})
        found = set(cursor.fetchall())
    # then the hours of those GPUs in the range, and the measured row's samples only
    assert found == {
        ("hour", asked[0].pk, None, T0), ("hour", asked[0].pk, None, T0 + HOUR), ("hour", asked[1].pk, None, T0),
        ("samples", asked[0].pk, job.pk, T0),
    }  # fmt: skip


@pytest.mark.django_db
def test_the_joins_look_up_the_gpu_hours_of_the_range_they_are_given_only() -> None:
    # given a GPU-hour shared by two jobs, split by SM time
    first, second = JobFactory(), JobFactory()
    gpu = GpuFactory(node__cluster=first.cluster)
    GpuHourFactory(gpu=gpu, hour=T0, jobs_energy_j=G)
    for job, share in ((first, 0.25), (second, 0.75)):
        JobGpuHourFactory(job=job, gpu=gpu, hour=T0, energy_j=share * G, sampled_s=1800.0)
        JobGpuHourEnergyFactory(job=job, gpu=gpu, hour=T0, method="sm_time", energy_j=share * G)

    def parts(lo: object, hi: object) -> list[tuple[float, float]]:
        joins = band_joins(energy="e", lo="%(lo)s", hi="%(hi)s")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT band.below_j, band.above_j FROM jobs_jobgpuhourenergy e {joins} ORDER BY e.job_id",
                           {"lo": lo, "hi": hi})  # fmt: skip
            return cursor.fetchall()

    # then within the hour's range each row has energy_band's interval
    for (below, above), share in zip(parts(T0, T0 + HOUR), (0.25, 0.75), strict=True):
        band = energy_band(energy_j=share * G, gpu_jobs_j=G, method="sm_time", samples=1800.0)
        assert band is not None
        low, high = band
        assert (below, above) == pytest.approx((share * G - low, high - share * G))
        assert below > 0.0 and above > 0.0
    # and a range that does not hold the hour finds no GPU-hour: nothing to bound the rows by
    assert parts(T0 + HOUR, T0 + timedelta(days=1)) == [(0.0, 0.0), (0.0, 0.0)]
