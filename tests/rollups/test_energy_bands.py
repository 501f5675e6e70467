"""Error bars in rollups (docs/accuracy.md, "Sums"): each period of a team's, a cluster's and a job group's rollup
carries the interval of its jobs' energy, its job-GPU-hours' lows and highs added up and exact rows as they are
(apps.jobs.uncertainty's own rule, job_energy_band, applied to the period's rows); it holds the energy, adds up over
the days of a month, is the energy itself where every row is exact, and reads the same from the daily sums as from
the rows. The SQL that computes it in the database (apps.rollups.bands) is held to energy_band row by row."""

from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Q
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from apps.carbon.models import JobGroup
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.jobs.uncertainty import NO_BAND, BandRow, energy_band, job_energy_band
from apps.pipeline.inputs import footprints_recompute
from apps.rollups import selectors
from apps.rollups.bands import band_joins
from apps.rollups.models import TeamDay
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import HOUR, Fleet, fleet_build, intensity_set

pytestmark = pytest.mark.django_db

# Friday 27 November 2026: five days across a week's end (Monday 30 November) and a month's (1 December).
T0 = datetime(2026, 11, 27, tzinfo=UTC)
DAYS = 5
END = T0 + timedelta(days=DAYS)
SHARED_METHODS = ("sm_time", "sm_mem", "gpu_time", "busy_time", "memory", "equal")
SAMPLES = (0.0, 0.5, 1.0, 45.0, 600.0, 3600.0)  # under a second sampled: the hour's sampling says nothing (1)


@dataclass
class BandWorld:
    fleet: Fleet
    vision: Team
    nlp: Team
    group: JobGroup
    exact: Team  # a team whose jobs run alone on their GPUs: every row exact


Part = tuple[Job, float, str, float]  # a job's share of a GPU-hour: its energy, the method, its seconds sampled


def _gpu_hour(
    gpu: Any, hour: datetime, parts: list[Part], estimated: tuple[Job, float] | None = None
) -> tuple[list[JobGpuHour], list[JobGpuHourEnergy]]:
    """One GPU-hour shared by `parts` (job, energy, method, seconds sampled), and a job's estimated time in it."""
    rows, energy = [], []
    for job, joules, method, sampled in parts:
        rows.append(JobGpuHour(job=job, gpu=gpu, hour=hour, source="agent", energy_j=joules, sampled_s=sampled,
                               occupancy_s=3600.0 / len(parts)))  # fmt: skip
        energy.append(JobGpuHourEnergy(job=job, gpu=gpu, hour=hour, method=method, energy_j=joules))
    if estimated is not None:
        job, joules = estimated
        rows.append(JobGpuHour(job=job, gpu=gpu, hour=hour, source="estimated", energy_j=joules, occupancy_s=600.0))
        energy.append(JobGpuHourEnergy(job=job, gpu=gpu, hour=hour, method="estimated", energy_j=joules))
    jobs_j = sum(p[1] for p in parts)
    GpuHour.objects.create(
        gpu=gpu, hour=hour, source="agent", device_energy_j=jobs_j + (estimated[1] if estimated else 0.0) + 9e4,
        agent_energy_j=jobs_j, jobs_energy_j=jobs_j, estimated_j=estimated[1] if estimated else 0.0,
        sampled_s=3600.0, occupied_s=3600.0,
    )  # fmt: skip
    return rows, energy


def _world(seed: int = 34) -> BandWorld:
    # given GPU-hours shared by one to three jobs of two teams and a job group, split by every method (exact,
    # measured against the truth or not), sampled for a whole hour or hardly at all, some with time nobody saw
    # charged as an estimate, one GPU whose jobs drew nothing in an hour; and a team whose jobs are always alone
    rng = random.Random(seed)
    fleet = fleet_build(servers=1, gpus_per_server=4)
    fleet.cluster.site.timezone = "Europe/Berlin"
    fleet.cluster.site.save()
    intensity_set("TEST", [0.3] * 24 * (DAYS + 2), start=T0 - timedelta(days=1))
    vision, nlp, exact = fleet.team, Team.objects.create(name="nlp"), Team.objects.create(name="solo")
    group = JobGroup.objects.create(name="sweeps", match_kind="name_prefix", match_value="sweep-")
    jobs = [
        Job.objects.create(
            cluster=fleet.cluster,
            job_key=f"slurm/{k}",
            team=team,
            start=T0,
            name=f"sweep-{k}",
            job_group=group if k % 2 else None,
            group_locked=True,
        )
        for k, team in enumerate([vision, vision, vision, nlp, nlp, nlp])
    ]
    solo = Job.objects.create(cluster=fleet.cluster, job_key="slurm/99", team=exact, start=T0)
    rows: list[JobGpuHour] = []
    energy: list[JobGpuHourEnergy] = []
    for h in range(DAYS * 24):
        hour = T0 + h * HOUR
        for gpu in fleet.gpus[:3]:
            sharing = rng.sample(jobs, rng.choice((1, 2, 2, 3)))
            method = "whole_gpu" if len(sharing) == 1 else rng.choice(SHARED_METHODS)
            parts = [(job, rng.uniform(5e4, 1.5e6), method, rng.choice(SAMPLES)) for job in sharing]
            if h == 7 and gpu == fleet.gpus[0]:  # the GPU's jobs drew nothing: no share to speak of
                parts = [(job, 0.0, "sm_time", 3600.0) for job in jobs[:2]]
            extra = (sharing[0], rng.uniform(1e4, 2e5)) if rng.random() < 0.1 else None
            found = _gpu_hour(gpu, hour, parts, extra)
            rows += found[0]
            energy += found[1]
        found = _gpu_hour(fleet.gpus[3], hour, [(solo, 4.2e5, "whole_gpu", 3600.0)])
        rows += found[0]
        energy += found[1]
    JobGpuHour.objects.bulk_create(rows)
    JobGpuHourEnergy.objects.bulk_create(energy)
    for job in [*jobs, solo]:
        Job.objects.filter(pk=job.pk).update(last_seen=END)
    footprints_recompute()  # the footprints, and the daily sums of teams, clusters and job groups
    return BandWorld(fleet, vision, nlp, group, exact)


@pytest.fixture
def world() -> BandWorld:
    return _world()


def _oracle(rows: Q, start: datetime, end: datetime) -> tuple[float, float, float]:
    """(energy, low, high) of the job-GPU-hours `rows` selects in [start, end), by the rule of a job's interval
    (job_energy_band) applied to them, in Python: every row on its own, its GPU-hour's jobs and samples read."""
    gpu_jobs_j = {(h.gpu_id, h.hour): h.jobs_energy_j for h in GpuHour.objects.all()}
    sampled = {(r.job_id, r.gpu_id, r.hour): r.sampled_s for r in JobGpuHour.objects.exclude(source="estimated")}
    total = sum(r.energy_j for r in JobGpuHour.objects.filter(rows, hour__gte=start, hour__lt=end))
    band_rows = [
        BandRow(
            e.method,
            e.energy_j,
            gpu_jobs_j.get((e.gpu_id, e.hour), 0.0),
            sampled.get((e.job_id, e.gpu_id, e.hour), 0.0),
        )
        for e in JobGpuHourEnergy.objects.filter(rows, hour__gte=start, hour__lt=end).exclude(method__in=NO_BAND)
    ]
    band = job_energy_band(total, band_rows)
    return (total, *(band if band is not None else (total, total)))


SUBJECTS = {
    "team": lambda w: (selectors.team_rollup, {"team": w.vision}, Q(job__team=w.vision, job__excluded_from_bill=False)),
    "cluster": lambda w: (
        selectors.cluster_rollup,
        {"cluster": w.fleet.cluster},
        Q(gpu__node__cluster=w.fleet.cluster),
    ),
    "job_group": lambda w: (selectors.job_group_rollup, {"group": w.group}, Q(job__job_group=w.group)),
}


def _period_bounds(period: str, granularity: str, start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """A rollup period's hours within [start, end) (periods are UTC days, weeks and months)."""
    first = datetime.fromisoformat(period).replace(tzinfo=UTC)
    if granularity == "day":
        after = first + timedelta(days=1)
    elif granularity == "week":
        after = first + timedelta(days=7)
    else:
        after = (first + timedelta(days=32)).replace(day=1)
    return max(first, start), min(after, end)


def test_the_sql_gives_each_row_the_interval_energy_band_gives_it(world: BandWorld) -> None:
    # when every job-GPU-hour's interval is read through the SQL the daily sums and the rollups use
    sql = f"""SELECT e.job_id, e.gpu_id, e.hour, e.method, e.energy_j, band.below_j, band.above_j
              FROM jobs_jobgpuhourenergy e {band_joins(energy="e", lo="%(lo)s", hi="%(hi)s")}"""
    with connection.cursor() as cursor:
        cursor.execute(sql, {"lo": T0, "hi": END})
        found = cursor.fetchall()
    gpu_jobs_j = {(h.gpu_id, h.hour): h.jobs_energy_j for h in GpuHour.objects.all()}
    sampled = {(r.job_id, r.gpu_id, r.hour): r.sampled_s for r in JobGpuHour.objects.exclude(source="estimated")}
    methods: set[str] = set()
    # then each is energy_band's, to the last bits (sqrt of a sum of squares there, hypot here); exact rows none
    for job_id, gpu_id, hour, method, joules, below, above in found:
        band = energy_band(energy_j=joules, gpu_jobs_j=gpu_jobs_j[(gpu_id, hour)], method=method,
                           samples=sampled.get((job_id, gpu_id, hour), 0.0))  # fmt: skip
        expected = (0.0, 0.0) if band is None else (joules - band[0], band[1] - joules)
        assert (below, above) == pytest.approx(expected, rel=1e-9, abs=1e-6), (method, joules)
        methods.add(method)
    assert methods >= {*SHARED_METHODS, "whole_gpu", "estimated"}


@pytest.mark.parametrize("subject", sorted(SUBJECTS))
@pytest.mark.parametrize("granularity", ["day", "week", "month"])
def test_a_periods_interval_is_its_rows_intervals_added_up_and_holds_its_energy(
    world: BandWorld, subject: str, granularity: str
) -> None:
    rollup, kwargs, rows = SUBJECTS[subject](world)
    # whole UTC days (the daily sums), and the same days in the site's time zone (the rows)
    berlin = (T0 - timedelta(hours=1) + timedelta(days=1), END - timedelta(hours=1))
    for start, end in ((T0, END), berlin):
        doc = rollup(**kwargs, start=start, end=end, granularity=granularity)
        assert doc["periods"]
        for p in doc["periods"]:
            energy, low, high = _oracle(rows, *_period_bounds(p["period"], granularity, start, end))
            # then each period's interval is what the rows' intervals add up to, and it holds the energy
            assert p["energy_j"] == pytest.approx(energy, rel=1e-12)
            assert (p["energy_low_j"], p["energy_high_j"]) == pytest.approx((low, high), rel=1e-9)
            assert p["energy_low_j"] <= p["energy_j"] <= p["energy_high_j"]
        # (a band, not the energy itself: the periods hold shared GPU-hours)
        assert all(p["energy_low_j"] < p["energy_j"] < p["energy_high_j"] for p in doc["periods"][1:])


def test_the_interval_adds_up_over_the_days_of_a_month_and_is_the_same_from_days_and_rows(world: BandWorld) -> None:
    for subject in SUBJECTS:
        rollup, kwargs, _ = SUBJECTS[subject](world)
        # when a month (and its week) is asked for whole, and day by day
        start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
        months = rollup(**kwargs, start=start, end=end, granularity="month")["periods"]
        days = rollup(**kwargs, start=start, end=end, granularity="day")["periods"]
        # then each month's interval is its days' added up (the daily sums add the same days: to the bit)
        for month in months:
            mine = [d for d in days if d["period"][:7] == month["period"][:7]]
            for end_ in ("energy_low_j", "energy_high_j"):
                assert month[end_] == sum((d[end_] for d in mine), 0.0), (subject, month["period"], end_)
        # and the rows of the same hours give the same interval
        from_rows = rollup(**kwargs, start=start, end=end - timedelta(microseconds=1), granularity="month")["periods"]
        for kept, read in zip(months, from_rows, strict=True):
            assert (kept["energy_low_j"], kept["energy_high_j"]) == pytest.approx(
                (read["energy_low_j"], read["energy_high_j"]), rel=1e-12
            )


def test_a_period_of_exact_rows_has_its_energy_as_both_ends(world: BandWorld) -> None:
    # given a team whose jobs were alone on their GPUs (and a cluster's day whose only jobs were exact, once)
    for start, end in ((T0, END), (T0 + HOUR, END - HOUR)):
        doc = selectors.team_rollup(team=world.exact, start=start, end=end, granularity="day")
        # then its interval is its energy, not a band and not empty
        assert doc["periods"]
        for p in doc["periods"]:
            assert p["energy_low_j"] == p["energy_j"] == p["energy_high_j"] > 0


def test_a_day_whose_interval_is_not_known_makes_its_periods_unknown(world: BandWorld) -> None:
    # given a team's day stored before the interval was (its hour rows since past retention)
    TeamDay.objects.filter(team=world.vision, day=date(2026, 11, 30)).update(energy_low_j=None, energy_high_j=None)
    # when the week and the month are asked for
    doc = selectors.team_rollup(team=world.vision, start=T0, end=END, granularity="week")
    # then the week holding it says not known, and the other keeps its interval
    known = {p["period"]: p["energy_low_j"] is not None for p in doc["periods"]}
    assert known == {"2026-11-23": True, "2026-11-30": False}


def test_the_api_and_its_csv_end_with_the_interval_and_a_member_sees_their_team_only(world: BandWorld) -> None:
    member = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=member, team=world.vision)
    api = APIClient()
    api.force_authenticate(member)
    query = {"start": T0.date().isoformat(), "end": END.date().isoformat(), "granularity": "day"}
    # when the member reads their team's rollup as JSON and as CSV
    doc = api.get(f"/api/teams/{world.vision.pk}/rollup/", query, HTTP_ACCEPT="application/json").json()
    text = api.get(f"/api/teams/{world.vision.pk}/rollup/", {**query, "format": "csv"}).content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    band = ["energy_low_j", "energy_high_j", "energy_low_kwh", "energy_high_kwh"]
    # then each period and the totals end with the interval, in J and kWh; the totals' the periods' added up
    for line in [*doc["periods"], doc["totals"]]:
        assert list(line)[-4:] == band
        assert line["energy_low_j"] < line["energy_j"] < line["energy_high_j"]
        assert line["energy_low_kwh"] == pytest.approx(line["energy_low_j"] / 3.6e6)
    for end_ in band[:2]:
        assert doc["totals"][end_] == pytest.approx(sum(p[end_] for p in doc["periods"]), rel=1e-12)
    # and the CSV's last columns are the same, after every column there was before
    header = next(csv.reader(io.StringIO(text)))
    assert header[-4:] == band and header.index("waste_cost") < header.index("energy_low_j")
    for row, line in zip(rows, [*doc["periods"], doc["totals"]], strict=True):
        assert float(row["energy_low_j"]) == pytest.approx(line["energy_low_j"])
    # and another team's rollup is not theirs to read
    assert api.get(f"/api/teams/{world.nlp.pk}/rollup/", query).status_code == 404


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # A job's energy in a GPU-hour: none, or at least a millijoule (NVML's energy counter counts millijoules).
    shares=st.lists(st.just(0.0) | st.floats(min_value=1e-3, max_value=2e6), min_size=1, max_size=4),
    method=st.sampled_from((*SHARED_METHODS, "whole_gpu")),
    samples=st.lists(st.sampled_from(SAMPLES) | st.floats(min_value=0.0, max_value=3600.0), min_size=4, max_size=4),
)
def test_any_gpu_hours_interval_in_sql_is_energy_bands(shares: list[float], method: str, samples: list[float]) -> None:
    with transaction.atomic():
        # given one GPU-hour shared by a few jobs, whatever their energies and samples
        fleet = fleet_build(servers=1, gpus_per_server=1)
        jobs = [Job.objects.create(cluster=fleet.cluster, job_key=f"k/{k}", team=fleet.team, start=T0)
                for k in range(len(shares))]  # fmt: skip
        parts = [(job, joules, method, n) for job, joules, n in zip(jobs, shares, samples, strict=False)]
        rows, energy = _gpu_hour(fleet.gpus[0], T0, parts)
        JobGpuHour.objects.bulk_create(rows)
        JobGpuHourEnergy.objects.bulk_create(energy)
        with connection.cursor() as cursor:
            joins = band_joins(energy="e", lo="%(lo)s", hi="%(hi)s")
            cursor.execute(
                f"SELECT e.energy_j, band.below_j, band.above_j FROM jobs_jobgpuhourenergy e {joins} ORDER BY e.job_id",
                {"lo": T0, "hi": T0 + HOUR},
            )
            found = cursor.fetchall()
        # then the SQL's parts are energy_band's
        for (joules, below, above), (_, _, _, n) in zip(found, parts, strict=True):
            band = energy_band(energy_j=joules, gpu_jobs_j=sum(shares), method=method, samples=n)
            expected = (0.0, 0.0) if band is None else (joules - band[0], band[1] - joules)
            assert (below, above) == pytest.approx(expected, rel=1e-9, abs=1e-6)
        transaction.set_rollback(True)
