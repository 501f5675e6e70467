"""Real dcgm-exporter outputs (tests/fixtures/exporters, sources in SOURCES.md) as real Prometheus setups store
them, ingested through a real Prometheus: whose pod a GPU is, which label names its node, GPUs with no energy
meter, and exporters whose names fleetwatt does not read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.dashboard.selectors import scheduler_sync_status
from apps.fleet.models import Cluster, Node
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.ingest import IngestError, hour_fetch_shard, hour_ingest
from apps.telemetry.health import cluster_checks
from apps.telemetry.models import GpuHour, IngestedHour
from apps.telemetry.prometheus import reader_for
from apps.telemetry.shards import cluster_shards

from .exporter_history import prometheus_with, scrape_read, stored

pytestmark = pytest.mark.django_db

HOUR = datetime(2026, 11, 2, 10, tzinfo=UTC)
SCRAPE_S = 30
# The scrape target's labels kube-prometheus-stack's ServiceMonitor gives the GPU Operator's dcgm-exporter.
OPERATOR_TARGET = {
    "container": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
    "instance": "10.128.126.60:9400",
    "job": "nvidia-dcgm-exporter",
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-kmtlw",
    "service": "nvidia-dcgm-exporter",
}
PLAIN_TARGET = {"instance": "gpu-node:9400", "job": "dcgm-exporter"}
# A dcgm-exporter of a site's own, which dcgm_job_key's rule for the GPU Operator's and the Helm chart's does not know.
OWN_EXPORTER_TARGET = {
    "container": "exporter",
    "instance": "10.244.7.4:9400",
    "job": "gpu-telemetry",
    "namespace": "monitoring",
    "pod": "gpu-telemetry-5vq8d",
}
# kube-prometheus-stack scrapes kube-state-metrics with honorLabels: true: a pod's labels are its own.
KSM_TARGET = {"instance": "10.244.1.9:8080", "job": "kube-state-metrics"}

Served = Callable[..., AbstractContextManager[Cluster]]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """`served(fixture, target=..., honor_labels=..., **cluster fields)`: the fixture's hour in a fresh Prometheus,
    and a cluster reading it."""
    from contextlib import contextmanager

    @contextmanager
    def serve(
        name: str, *, target: dict[str, str], honor_labels: bool = True, kube: bool = False, **fields: Any
    ) -> Iterator[Cluster]:
        series = stored(scrape_read(name), target=target, honor_labels=honor_labels)
        if kube:  # kube-state-metrics beside it, and the cluster reading pods
            series += stored(scrape_read("kube_state_metrics.prom"), target=KSM_TARGET, honor_labels=True)
            fields["kube_pods"] = True
        with prometheus_with(series, tmp_path, hour_start=HOUR.timestamp(), scrape_s=SCRAPE_S) as url:
            yield Cluster.objects.create(name="k8s", prometheus_url=url, scrape_interval_s=SCRAPE_S, **fields)

    yield serve


def _ingest() -> None:
    call_command("ingest", start=HOUR.isoformat(), end="2026-11-02T11:00:00Z", cluster="k8s", verbosity=0)


def _nothing_written() -> bool:
    return not (Job.objects.exists() or GpuHour.objects.exists() or IngestedHour.objects.exists())


def test_the_workload_named_in_exported_labels_takes_the_gpu_not_the_exporters_pod(served: Served) -> None:
    # given the GPU Operator's dcgm-exporter scraped by kube-prometheus-stack with honorLabels: false
    with served("gpu_operator_exported.prom", target=OPERATOR_TARGET, honor_labels=False):
        # when
        _ingest()
    # then the workload takes the hour's energy (312.4 W for the hour), the exporter's pod nothing
    (job,) = Job.objects.all()
    assert job.job_key == "k8s/kserve-lab/qwen3-next-80b-kserve-f7bdf9b9b-7ngnd"
    assert JobGpuHour.objects.get(job=job).energy_j == pytest.approx(312.4 * 3600, rel=1e-6)
    assert not Job.objects.filter(job_key__contains="dcgm-exporter").exists()


def test_an_idle_gpu_is_never_charged_to_the_exporters_own_pod(served: Served) -> None:
    # given an idle GPU: dcgm-exporter maps no pod, so its series carry the scrape target's pod (honorLabels: true)
    with served("gpu_operator_idle.prom", target=OPERATOR_TARGET, honor_labels=True):
        _ingest()
    # then no job: the hour's energy is the GPU's, unobserved (the scheduler's estimate may place it later)
    assert not Job.objects.exists()
    (gpu_hour,) = GpuHour.objects.all()
    assert gpu_hour.jobs_energy_j == 0.0
    assert gpu_hour.unobserved_j == pytest.approx(302.206 * 3600, rel=1e-6)


def test_a_pod_that_requests_no_gpu_is_not_charged_where_kube_state_metrics_says_so(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    # given an idle GPU under a dcgm-exporter of the site's own, whose series carry its own pod's labels
    with served("gpu_operator_idle.prom", target=OWN_EXPORTER_TARGET, kube=True) as cluster:
        # when the hour is ingested, kube-state-metrics saying that pod requests no GPU
        call_command("ingest", start=HOUR.isoformat(), end="2026-11-02T11:00:00Z", cluster="k8s", verbosity=0)
    # then the pod is no job: the hour's energy is the GPU's, unobserved, and the ingest says why
    assert not Job.objects.exists()
    gpu_hour = GpuHour.objects.get()
    assert gpu_hour.jobs_energy_j == 0.0
    assert gpu_hour.unobserved_j == pytest.approx(302.206 * 3600, rel=1e-6)
    assert "monitoring/gpu-telemetry-5vq8d, which requests no GPU" in capsys.readouterr().err
    assert IngestedHour.objects.get(cluster=cluster).stats["pods_without_gpu_request"] == [
        {"job_key": "k8s/monitoring/gpu-telemetry-5vq8d", "gpus": ["GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116"]}
    ]


def test_without_kube_state_metrics_the_label_keeps_its_word(served: Served) -> None:
    # given the same GPU on a cluster that reads no pods: nothing says the pod holds no GPU
    with served("gpu_operator_idle.prom", target=OWN_EXPORTER_TARGET):
        _ingest()
    # then the label is believed (docs/deploy.md: read kube-state-metrics, or name the exporter's container)
    assert list(Job.objects.values_list("job_key", flat=True)) == ["k8s/monitoring/gpu-telemetry-5vq8d"]


def test_a_workload_that_requests_a_gpu_is_charged_beside_kube_state_metrics(served: Served) -> None:
    with served("gpu_operator_exported.prom", target=OPERATOR_TARGET, honor_labels=False, kube=True) as cluster:
        _ingest()
    (job,) = Job.objects.all()
    assert job.job_key == "k8s/kserve-lab/qwen3-next-80b-kserve-f7bdf9b9b-7ngnd"
    assert JobGpuHour.objects.get(job=job).energy_j == pytest.approx(312.4 * 3600, rel=1e-6)
    assert IngestedHour.objects.get(cluster=cluster).stats["pods_without_gpu_request"] == []


def test_a_relabelled_node_label_names_the_node_where_the_cluster_says_so(served: Served) -> None:
    # given dcgm-exporter's Hostname holding its own pod's name, and the node relabelled into `node`
    with served("node_relabelled.prom", target=PLAIN_TARGET, dcgm_host_label="node"):
        _ingest()
    assert list(Node.objects.values_list("hostname", flat=True)) == ["aks-gpunp-66230965-vmss000000"]
    assert GpuHour.objects.get().device_energy_j == pytest.approx(61.5 * 3600, rel=1e-6)


def test_a_series_with_no_host_label_is_refused_and_nothing_written(served: Served) -> None:
    with served("no_host.prom", target=PLAIN_TARGET), pytest.raises(CommandError, match="carry no host label"):
        _ingest()
    assert _nothing_written()


def test_dcgm_exporter_4_8_hostname_is_matched_by_a_shard_of_a_cluster_that_names_it(served: Served) -> None:
    # given dcgm-exporter 4.8.3+ (`hostname`) on a cluster split into shards by node name
    with served("dcgm_4_8_hostname.prom", target=PLAIN_TARGET, dcgm_host_label="hostname") as cluster:
        named, rest = cluster_shards([("aws", "ip-100-.*")])
        reader = reader_for(cluster)
        try:
            # when each shard is fetched
            in_named = hour_fetch_shard(cluster=cluster, hour=HOUR, reader=reader, node_match=named.node_match)
            in_rest = hour_fetch_shard(cluster=cluster, hour=HOUR, reader=reader, node_match=rest.node_match)
        finally:
            reader.close()
    # then the GPU is in the shard its node's name matches, not in `rest`
    assert {sw.labels["UUID"] for sw in in_named.data.dcgm_energy} == {"GPU-22dbdd79-f55a-92a8-aa39-322198e72ed6"}
    assert in_rest.data.dcgm_energy == []


def test_dcgm_exporter_4_8_hostname_on_a_sharded_cluster_without_the_setting_is_refused(served: Served) -> None:
    with served("dcgm_4_8_hostname.prom", target=PLAIN_TARGET) as cluster:
        _, rest = cluster_shards([("aws", "ip-100-.*")])
        reader = reader_for(cluster)
        try:
            with pytest.raises(IngestError, match="set the cluster's dcgm_host_label to hostname"):
                hour_fetch_shard(cluster=cluster, hour=HOUR, reader=reader, node_match=rest.node_match)
        finally:
            reader.close()


def test_dcgm_exporter_4_8_hostname_names_the_node_in_the_plain_ingest(served: Served) -> None:
    with served("dcgm_4_8_hostname.prom", target=PLAIN_TARGET):
        _ingest()
    assert list(Node.objects.values_list("hostname", flat=True)) == ["ip-100-64-171-120.ec2.internal"]


def test_a_vgpu_guest_without_an_energy_meter_is_said_by_the_ingest_the_status_and_healthz(served: Served) -> None:
    # given a GRID vGPU guest: utilisation and framebuffer, no power, no energy
    with served("vgpu_guest.prom", target=PLAIN_TARGET) as cluster:
        # when: the ingest names the GPU and what it lacks, and exits non-zero
        with pytest.raises(CommandError, match="no energy meter") as raised:
            _ingest()
        checks = cluster_checks(now=timezone.now(), max_lag_h=10_000, timeout_s=5)
    assert "GPU-0946f70c-659b-4c39-8b78-7e7600000000" in str(raised.value)
    # then the hour is recorded with the GPU flagged, never as a zero of energy
    stats = IngestedHour.objects.get(cluster=cluster).stats
    assert stats["no_energy_meter"] == [
        {
            "uuid": "GPU-0946f70c-659b-4c39-8b78-7e7600000000",
            "hostname": "test-ai-1-node-pool-40c-d5ds8-br9r6-9tb2c",
            "missing": ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_USAGE"],
            # what is known of it is kept: the scrape's utilisation and framebuffer, there the whole hour
            "utilisation_pct": 0.0,
            "memory_used_mib": 0.0,
            "memory_peak_mib": 0.0,
            "seen_s": 3600.0,
            "jobs_s": {},
        }
    ]
    assert not GpuHour.objects.exists()
    assert checks["ingest:k8s"]["no_energy_meter"] == ["GPU-0946f70c-659b-4c39-8b78-7e7600000000"]
    status = next(s for s in scheduler_sync_status(now=timezone.now()) if s.cluster.name == "k8s")
    assert [g["uuid"] for g in status.no_energy_meter] == ["GPU-0946f70c-659b-4c39-8b78-7e7600000000"]


def test_dcgm_exporter_1x_names_are_named_with_what_fleetwatt_needs(served: Served) -> None:
    with served("dcgm_exporter_1x.prom", target=PLAIN_TARGET), pytest.raises(CommandError) as raised:
        _ingest()
    message = str(raised.value)
    assert "dcgm_power_usage" in message and "dcgm_total_energy_consumption" in message
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in message
    assert _nothing_written()


def test_reingesting_an_exporters_hour_changes_nothing(served: Served) -> None:
    with served("gpu_operator_exported.prom", target=OPERATOR_TARGET, honor_labels=False) as cluster:
        hour_ingest(cluster=cluster, hour=HOUR)
        first = list(JobGpuHour.objects.values_list("job__job_key", "energy_j", "occupancy_s"))
        hour_ingest(cluster=cluster, hour=HOUR)
    assert list(JobGpuHour.objects.values_list("job__job_key", "energy_j", "occupancy_s")) == first
