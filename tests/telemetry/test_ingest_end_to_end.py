"""The spine end to end: simulator -> promtool -> a real Prometheus -> `manage.py ingest` -> Postgres; and
the same history imported into VictoriaMetrics, which must give the same rows to the joule."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.core.management import call_command

from apps.jobs.models import Job
from apps.telemetry.models import GpuHour
from apps.waste.models import Flag
from tests.conftest import ENGINES
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

START, END = "2026-11-02T00:00:00Z", "2026-11-02T07:00:00Z"


def _ingest(start: str = START, end: str = END) -> None:
    call_command("ingest", start=start, end=end, verbosity=0)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("offset_s", [0.0, 7.0], ids=["aligned", "scrapes-7s-off-the-hour"])
def test_every_job_matches_the_truth(engine_loader, cluster_for, engine: str, offset_s: float) -> None:
    # given
    history = engine_loader(engine, spine_scenario(scrape_offset_s=offset_s))
    cluster_for(history)
    # when
    _ingest()
    # then
    jobs = {j.job_key: j for j in Job.objects.all()}
    assert set(jobs) == set(history.truth)
    for key, truth in history.truth.items():
        job = jobs[key]
        assert job.coverage == pytest.approx(truth.coverage, abs=0.01), key
        if truth.source == "agent":
            if truth.coverage >= 0.95:
                assert job.energy_j == pytest.approx(truth.energy_j, rel=1e-4), key
            measured = {m: j for m, j in job.attribution_j.items() if m != "estimated"}
            assert measured.keys() == truth.energy_by_method.keys(), key
            for method, joules in truth.energy_by_method.items():
                assert job.attribution_j[method] == pytest.approx(joules, rel=1e-4, abs=1.0), (key, method)
            if "estimated" in job.attribution_j:
                # a gap the agent saw the job on both sides of (no scheduler read): charged as an estimate, so
                # the job's energy is what it drew every second it ran, seen or not
                assert truth.coverage < 0.95, key
                assert job.energy_j == pytest.approx(truth.physical_energy_j, rel=0.01), key
        else:
            # dcgm-exporter only: hourly series, so the split is as close as the scrape interval allows.
            assert job.energy_j == pytest.approx(truth.energy_j, rel=0.02), key
            assert job.attribution == truth.attribution, key
        assert ("low_coverage" in job.flags) == (truth.coverage < 0.95), key
    assert Flag.objects.filter(kind="low_coverage").count() == sum(t.coverage < 0.95 for t in history.truth.values())


def test_jobs_plus_idle_equal_device_energy_every_gpu_hour(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario())
    cluster_for(history)
    _ingest()
    rows = GpuHour.objects.filter(source="agent")
    assert rows.count() >= 6 * 6
    for row in rows:
        parts = row.jobs_energy_j + row.idle_energy_j + row.unobserved_j
        assert parts == pytest.approx(row.device_energy_j, rel=0.005), row
        if row.dcgm_energy_j is not None and row.counter_resets == 0:
            # The agent's outage is kept as unobserved energy: the GPU-hour still adds up to DCGM's meter.
            assert row.device_energy_j == pytest.approx(row.dcgm_energy_j, rel=0.005), row


def test_reference_residual_is_small_when_the_agent_saw_the_hour(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario())
    cluster_for(history)
    _ingest()
    seen_whole_hour = GpuHour.objects.filter(source="agent", sampled_s__gte=3600 - 30, counter_resets=0)
    assert seen_whole_hour.exists()
    for row in seen_whole_hour:
        assert abs(row.residual_ratio) < 0.02, row
    assert not Flag.objects.filter(kind="conservation").exists()
    assert Flag.objects.filter(kind="counter_reset").count() == 1


def test_agent_restart_and_driver_reset_lose_no_energy(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario())
    cluster_for(history)
    _ingest()
    across_reset = Job.objects.get(job_key="slurm/106")  # spans the counter reset and a scrape gap
    assert across_reset.energy_j == pytest.approx(history.truth["slurm/106"].physical_energy_j, rel=1e-4)
    assert "counter_reset" in across_reset.flags
    restarted = Job.objects.get(job_key="slurm/105")  # agent down 15 minutes, then restarted
    truth = history.truth["slurm/105"]
    # what the agent saw is measured; the 15 minutes it saw the job on both sides of are DCGM's meter, charged
    # as an estimate and flagged, never passed off as measured
    estimated = restarted.attribution_j["estimated"]
    assert restarted.energy_j - estimated == pytest.approx(truth.energy_j, rel=1e-4)
    assert truth.energy_j < truth.physical_energy_j
    assert restarted.energy_j == pytest.approx(truth.physical_energy_j, rel=0.01)
    assert "unobserved" in restarted.flags


def _snapshot() -> dict[str, list[tuple]]:
    from apps.jobs.models import JobGpuHour, JobGpuHourEnergy

    return {
        "jobs": sorted(
            Job.objects.values_list(
                "job_key", "energy_j", "coverage", "attribution", "gpu_hours", "start", "end", "flags"
            )
        ),
        "hours": sorted(
            JobGpuHour.objects.values_list("job__job_key", "gpu__uuid", "hour", "energy_j", "sampled_s", "occupancy_s")
        ),
        "energy": sorted(
            JobGpuHourEnergy.objects.values_list("job__job_key", "gpu__uuid", "hour", "method", "energy_j")
        ),
        "gpu_hours": sorted(
            GpuHour.objects.values_list("gpu__uuid", "hour", "device_energy_j", "idle_energy_j", "residual_j")
        ),
        "flags": sorted(Flag.objects.values_list("kind", "job__job_key", "gpu__uuid", "hour")),
    }


def test_ingesting_twice_leaves_the_same_rows(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario())
    cluster_for(history)
    _ingest()
    first = _snapshot()
    ids = sorted(Job.objects.values_list("pk", flat=True))
    _ingest()
    assert _snapshot() == first
    assert sorted(Job.objects.values_list("pk", flat=True)) == ids


def test_a_day_hour_by_hour_equals_one_run(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario())
    cluster_for(history)
    _ingest()
    whole = _snapshot()
    Job.objects.all().delete()
    GpuHour.objects.all().delete()
    # Hours in a shuffled order, one by one.
    for hour in [3, 0, 6, 1, 5, 2, 4]:
        _ingest(f"2026-11-02T{hour:02d}:00:00Z", f"2026-11-02T{hour + 1:02d}:00:00Z")
    one_by_one = _snapshot()
    for key in whole:
        if key == "jobs":
            continue
        assert one_by_one[key] == whole[key], key
    jobs_whole = {r[0]: r for r in whole["jobs"]}
    for row in one_by_one["jobs"]:
        assert row[1] == pytest.approx(jobs_whole[row[0]][1], rel=1e-9)
        assert row[2:] == jobs_whole[row[0]][2:] or row[2] == pytest.approx(jobs_whole[row[0]][2])


def test_short_job_of_a_few_minutes_is_exact(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario(scrape_offset_s=7.0))
    cluster_for(history)
    _ingest()
    short = Job.objects.get(job_key="slurm/104")
    truth = history.truth["slurm/104"]
    assert short.energy_j == pytest.approx(truth.physical_energy_j, rel=1e-4)
    assert short.start == datetime.fromtimestamp(truth.start).astimezone(short.start.tzinfo)
    assert short.end is not None


def _energy_rows() -> dict[str, dict[tuple, tuple]]:
    """Every stored row that carries energy, by its natural key: what two engines must agree on."""
    from apps.jobs.models import JobGpuHour, JobGpuHourEnergy

    def keyed(rows: list[tuple], key_len: int) -> dict[tuple, tuple]:
        # Each key is a row's whole unique key: a shorter one kept whichever of its rows Postgres returned last (a
        # job's agent row and its estimated row of one GPU-hour), which depends on where earlier tests left free space.
        found = {row[:key_len]: row[key_len:] for row in rows}
        assert len(found) == len(rows), "two rows with one key: the key is not the table's unique key"
        return found

    return {
        "jobs": keyed(list(Job.objects.values_list("job_key", "energy_j", "coverage", "gpu_hours", "start", "end")), 1),
        "job_gpu_hours": keyed(
            list(
                JobGpuHour.objects.values_list(
                    "job__job_key", "gpu__uuid", "hour", "source", "energy_j", "sampled_s", "occupancy_s", "sm_s"
                )
            ),
            4,
        ),
        "energy": keyed(
            list(JobGpuHourEnergy.objects.values_list("job__job_key", "gpu__uuid", "hour", "method", "energy_j")), 4
        ),
        "gpu_hours": keyed(
            list(
                GpuHour.objects.values_list(
                    "gpu__uuid",
                    "hour",
                    "source",
                    "device_energy_j",
                    "jobs_energy_j",
                    "idle_energy_j",
                    "unobserved_j",
                    "residual_j",
                    "agent_energy_j",
                    "dcgm_energy_j",
                    "sampled_s",
                    "occupied_s",
                    "counter_resets",
                )
            ),
            2,
        ),
        "flags": keyed(list(Flag.objects.values_list("kind", "job__job_key", "gpu__uuid", "hour")), 4),
    }


def _same_to_the_microjoule(a: tuple, b: tuple) -> bool:
    """Equal, numbers within 1e-6 J (or 1e-9 relative): VictoriaMetrics keeps a value's first 15 or so
    significant digits, Prometheus all of a float64's."""
    return len(a) == len(b) and all(
        x == pytest.approx(y, rel=1e-9, abs=1e-6) if isinstance(x, float) and isinstance(y, float) else x == y
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("offset_s", [0.0, 7.0], ids=["aligned", "scrapes-7s-off-the-hour"])
def test_prometheus_and_victoria_metrics_store_the_same_rows(engine_loader, cluster_for, offset_s: float) -> None:
    # given the same history in both engines
    scenario = spine_scenario(scrape_offset_s=offset_s)
    rows = {}
    for engine in ENGINES:
        cluster_for(engine_loader(engine, scenario))
        # when each is ingested into an empty database
        Job.objects.all().delete()
        GpuHour.objects.all().delete()
        Flag.objects.all().delete()
        _ingest()
        rows[engine] = _energy_rows()
    # then every row is there in both, with the same figures
    prometheus, victoria = rows["prometheus"], rows["victoria-metrics"]
    for table in prometheus:
        assert prometheus[table].keys() == victoria[table].keys(), table
        for key, values in prometheus[table].items():
            assert _same_to_the_microjoule(values, victoria[table][key]), (table, key, values, victoria[table][key])
    assert len(prometheus["job_gpu_hours"]) > 30 and len(prometheus["gpu_hours"]) > 40
