"""Bad input and an unreachable Prometheus: a clear error, nothing written, no watermark moved."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.ingest import closed_hours_ingest, hour_ingest
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from tests.scenarios import spine_scenario

pytestmark = pytest.mark.django_db


def _nothing_written() -> bool:
    return not (
        Job.objects.exists() or JobGpuHour.objects.exists() or GpuHour.objects.exists() or IngestedHour.objects.exists()
    )


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-11-02T05:00:00Z", "2026-11-02T01:00:00Z", "must be before"),
        ("yesterday", "2026-11-02T01:00:00Z", "not an ISO 8601 time"),
        ("2026-11-02T00:30:00Z", "2026-11-02T01:00:00Z", "not a whole hour"),
        ("2026-11-02T00:00:00", "2026-11-02T01:00:00", "no time zone"),
        ("2026-11-02T00:00:00Z", "2099-01-01T00:00:00Z", "has not closed"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_error(start: str, end: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("ingest", start=start, end=end, verbosity=0)
    assert _nothing_written()


def test_unknown_cluster_is_refused() -> None:
    with pytest.raises(CommandError, match="Unknown cluster 'nope'"):
        call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T01:00:00Z", cluster="nope", verbosity=0)
    assert _nothing_written()


@pytest.mark.prometheus
def test_prometheus_outage_then_catch_up(history_loader, cluster_for) -> None:
    history = history_loader(spine_scenario())
    cluster = cluster_for(history)
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T02:00:00Z", verbosity=0)
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == datetime(2026, 11, 2, 2, tzinfo=UTC)
    jobs_before = sorted(Job.objects.values_list("job_key", "energy_j"))

    # Prometheus unreachable: a clear error naming the URL, nothing written, the watermark stays.
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url="http://127.0.0.1:9")
    with pytest.raises(CommandError, match=r"Prometheus at http://127\.0\.0\.1:9 is unreachable"):
        call_command("ingest", start="2026-11-02T02:00:00Z", end="2026-11-02T04:00:00Z", verbosity=0)
    assert sorted(Job.objects.values_list("job_key", "energy_j")) == jobs_before
    assert IngestedHour.objects.count() == 2
    # The beat task during the outage: logs, writes nothing, keeps the watermark.
    assert closed_hours_ingest(now=datetime(2026, 11, 2, 7, 5, tzinfo=UTC)) == []
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == datetime(2026, 11, 2, 2, tzinfo=UTC)

    # Back: the beat task catches up every missed hour.
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url=history.url)
    reports = closed_hours_ingest(now=datetime(2026, 11, 2, 7, 5, tzinfo=UTC))
    assert [r.hour.hour for r in reports] == [2, 3, 4, 5, 6]
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == datetime(2026, 11, 2, 7, tzinfo=UTC)
    for key, truth in history.truth.items():
        if truth.source == "agent" and truth.coverage >= 0.95:
            assert Job.objects.get(job_key=key).energy_j == pytest.approx(truth.energy_j, rel=1e-4), key


@pytest.mark.prometheus
def test_a_worker_killed_mid_hour_leaves_nothing_half_written(history_loader, cluster_for, monkeypatch) -> None:
    history = history_loader(spine_scenario())
    cluster = cluster_for(history)
    hour = datetime(2026, 11, 2, 1, tzinfo=UTC)

    def die(**kwargs: object) -> None:
        raise SystemExit("worker killed")

    # Dies after the hour's job and GPU rows are written, before its flags and summaries.
    monkeypatch.setattr("apps.waste.services.gpu_hour_flags_replace", die)
    with pytest.raises(SystemExit):
        hour_ingest(cluster=cluster, hour=hour)
    assert _nothing_written()
    assert not IngestWatermark.objects.exists()
    monkeypatch.undo()
    hour_ingest(cluster=cluster, hour=hour)
    assert JobGpuHour.objects.filter(hour=hour).exists()


@pytest.mark.prometheus
def test_an_hour_ingested_while_open_does_not_move_the_watermark(history_loader, cluster_for) -> None:
    from django.utils import timezone

    from apps.telemetry.services import hour_floor

    history = history_loader(spine_scenario())
    cluster = cluster_for(history)
    now = hour_floor(timezone.now())
    IngestWatermark.objects.create(cluster=cluster, ingested_through=now)
    hour_ingest(cluster=cluster, hour=now)  # the current hour: still open
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == now
