"""Re-ingesting an hour from a Prometheus that no longer has it must not delete the stored rows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.simulator.local_prometheus import LocalPrometheus, config_write, free_port
from apps.telemetry.guard import HourTotals, beyond_retention, retention_parse, source_loss
from apps.telemetry.models import GpuHour
from apps.telemetry.prometheus import PrometheusReader
from apps.waste.models import Flag
from tests.scenarios import spine_scenario

pytestmark = pytest.mark.django_db

H0 = datetime(2026, 11, 2, tzinfo=UTC)


@pytest.fixture(scope="module", params=["3650d", "15d"], ids=["long-retention", "retention-15d"])
def empty_prometheus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalPrometheus]:
    """A real Prometheus that holds nothing: what a source looks like once retention dropped the hours (or
    a cluster pointed at the wrong one). With a 15-day retention the test hours are past it."""
    folder: Path = tmp_path_factory.mktemp("prometheus-empty")
    config_write(folder / "prometheus.yml", targets=[], scrape_interval_s=15)
    prometheus = LocalPrometheus(folder / "data", folder / "prometheus.yml", free_port())
    prometheus.start(retention=request.param, log=folder / "prometheus.log")
    prometheus.retention = request.param  # type: ignore[attr-defined]
    yield prometheus
    prometheus.stop()


REFUSALS = {
    "3650d": r"the source now gives 0 GPU-hours where \d+ are stored.*--force",
    "15d": r"older than the source's retention: the stored rows may be the only copy.*--force",
}


def _stored() -> dict[str, object]:
    return {
        "jobs": sorted(Job.objects.values_list("job_key", "energy_j", "gpu_hours", "coverage", "flags")),
        "job_rows": sorted(JobGpuHour.objects.values_list("job_id", "gpu_id", "hour", "energy_j")),
        "gpu_hours": sorted(GpuHour.objects.values_list("gpu_id", "hour", "device_energy_j")),
        "flags": sorted(Flag.objects.values_list("kind", "job_id", "gpu_id", "hour")),
    }


@pytest.mark.prometheus
def test_an_hour_the_source_lost_is_not_replaced_unless_forced(
    history_loader, cluster_for, empty_prometheus: LocalPrometheus
) -> None:
    # given two hours ingested from the source that had them
    cluster = cluster_for(history_loader(spine_scenario()))
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T02:00:00Z", verbosity=0)
    before = _stored()
    assert before["job_rows"] and before["gpu_hours"]
    # when the same hours are ingested again from a source that no longer holds them
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url=empty_prometheus.url)
    with pytest.raises(CommandError, match=REFUSALS[empty_prometheus.retention]):  # type: ignore[attr-defined]
        call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T02:00:00Z", verbosity=0)
    # then nothing changed
    assert _stored() == before
    # and an operator who means it can still replace them
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T01:00:00Z", force=True, verbosity=0)
    assert not GpuHour.objects.filter(hour=H0).exists()


@pytest.mark.prometheus
def test_the_source_says_how_long_it_keeps_samples(empty_prometheus: LocalPrometheus) -> None:
    reader = PrometheusReader(empty_prometheus.url, timeout_s=10)
    try:
        assert reader.retention() == retention_parse(empty_prometheus.retention)  # type: ignore[attr-defined]
        assert reader.retention() in (timedelta(days=3650), timedelta(days=15))
    finally:
        reader.close()


def test_an_unreachable_source_has_no_known_retention() -> None:
    reader = PrometheusReader("http://127.0.0.1:9", timeout_s=2)
    assert reader.retention() is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15d", timedelta(days=15)),
        ("1y2w", timedelta(days=379)),
        ("30d or 512MiB", timedelta(days=30)),
        ("2h30m", timedelta(hours=2, minutes=30)),
        ("0s", None),
        ("512MiB", None),
        ("", None),
    ],
)
def test_retention_as_prometheus_writes_it(text: str, expected: timedelta | None) -> None:
    assert retention_parse(text) == expected


GPUS = frozenset(f"GPU-{i}" for i in range(100))
STORED = HourTotals(gpus=GPUS, job_rows=300, device_energy_j=1e9)


@pytest.mark.parametrize(
    ("fresh", "beyond", "refused"),
    [
        (STORED, False, False),  # the same answer again
        (HourTotals(gpus=GPUS | {"GPU-new"}, job_rows=310, device_energy_j=1.02e9), False, False),  # more
        (HourTotals(), False, True),  # the source forgot the hour
        (HourTotals(gpus=GPUS - {"GPU-7"}, job_rows=297, device_energy_j=1e9), False, True),  # lost one GPU
        (HourTotals(gpus=GPUS, job_rows=300, device_energy_j=0.98e9), False, True),  # lost 2 % of the energy
        (HourTotals(gpus=GPUS, job_rows=300, device_energy_j=0.995e9), False, False),  # within the tolerance
        (STORED, True, True),  # past the source's retention: only we hold it
    ],
)
def test_what_counts_as_a_loss(fresh: HourTotals, beyond: bool, refused: bool) -> None:
    reason = source_loss(stored=STORED, fresh=fresh, beyond=beyond, min_ratio=0.99)
    assert (reason is not None) == refused


def test_a_lost_gpu_is_named() -> None:
    reason = source_loss(
        stored=STORED, fresh=HourTotals(gpus=GPUS - {"GPU-7"}, device_energy_j=1e9), beyond=False, min_ratio=0.99
    )
    assert reason is not None and "1 of the 100 GPU-hours" in reason and "GPU-7" in reason


def test_served_work_the_source_forgot_is_a_loss() -> None:
    # given an hour whose GPUs are all still there, but whose serving engines' series are gone
    stored = HourTotals(gpus=GPUS, job_rows=300, device_energy_j=1e9, work_rows=40)
    fresh = HourTotals(gpus=GPUS, job_rows=300, device_energy_j=1e9, work_rows=12)
    # then
    reason = source_loss(stored=stored, fresh=fresh, beyond=False, min_ratio=0.99)
    assert reason is not None and "12 rows of served work where 40 are stored" in reason
    assert source_loss(stored=stored, fresh=stored, beyond=False, min_ratio=0.99) is None


def test_nothing_stored_is_never_a_loss() -> None:
    assert source_loss(stored=HourTotals(), fresh=HourTotals(), beyond=True, min_ratio=0.5) is None


def test_beyond_retention() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert beyond_retention(hour=now - timedelta(days=16), now=now, retention=timedelta(days=15))
    assert not beyond_retention(hour=now - timedelta(days=14), now=now, retention=timedelta(days=15))
    assert not beyond_retention(hour=now - timedelta(days=999), now=now, retention=None)
