"""GPUs only dcgm-exporter reports, from query answers built by hand: label drift, hpc_job, MIG copies."""

from __future__ import annotations

import pytest

from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import HourInput, PodClaims, SeriesWindow, UnclaimedPod, hour_compute

T0 = 1_793_577_600.0  # an hour's start
S = 15


def _gpu(uuid_label: str, host_label: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {uuid_label: "GPU-1", host_label: "node-a", "gpu": "0", "modelName": "NVIDIA H100", **(extra or {})}


def _energy(labels: dict[str, str], first_mj: float, last_mj: float, anchor: float | None) -> SeriesWindow:
    return SeriesWindow(labels=labels, window=CounterWindow(last=last_mj, anchor=anchor, minimum=first_mj))


def test_one_hpc_job_on_the_gpu_takes_its_energy_whole() -> None:
    # given dcgm-exporter's old label set (UUID, Hostname) and an HPC job mapping for the whole hour
    job = _gpu("UUID", "Hostname", {"hpc_job": "4242"})
    data = HourInput(hour_start=T0, scrape_interval_s=S)
    data.dcgm_energy = [_energy(job, 5e9, 5e9 + 1.8e9, anchor=5e9)]  # 1.8 MJ in the hour
    data.dcgm_series = [
        ("samples", job, 240), ("power_sum", job, 240 * 500.0), ("first", job, T0 - 5), ("last", job, T0 + 3585),
    ]  # fmt: skip
    # when
    result = hour_compute(data)
    # then
    (row,) = result.job_hours
    assert row.job_key == "slurm/4242" and row.source == "dcgm"
    assert row.energy_by_method == {"whole_gpu": pytest.approx(1.8e6)}
    assert row.occupancy_s == pytest.approx(3600)
    assert result.gpus["GPU-1"].model_name == "NVIDIA H100" and result.gpus["GPU-1"].hostname == "node-a"


def test_pods_after_a_relabel_collision_split_by_their_own_utilisation() -> None:
    a = _gpu("uuid", "hostname", {"exported_pod": "a", "exported_namespace": "ml"})
    b = _gpu("uuid", "hostname", {"exported_pod": "b", "exported_namespace": "ml"})
    data = HourInput(hour_start=T0, scrape_interval_s=S)
    # dcgm copies the GPU's energy onto both pods' series: the same counter, never to be summed
    data.dcgm_energy = [_energy(a, 1e9, 1e9 + 2e9, 1e9), _energy(b, 1e9, 1e9 + 2e9, 1e9)]
    data.dcgm_series = [
        ("samples", a, 240), ("power_sum", a, 240 * 600.0), ("first", a, T0), ("last", a, T0 + 3585), ("util", a, 75.0),
        ("samples", b, 240), ("power_sum", b, 240 * 600.0), ("first", b, T0), ("last", b, T0 + 3585), ("util", b, 25.0),
    ]  # fmt: skip
    result = hour_compute(data)
    rows = {r.job_key: r for r in result.job_hours}
    assert rows["k8s/ml/a"].energy_by_method == {"sm_time": pytest.approx(1.5e6)}
    assert rows["k8s/ml/b"].energy_by_method == {"sm_time": pytest.approx(0.5e6)}
    (gpu_hour,) = result.gpu_hours
    assert gpu_hour.device_energy_j == pytest.approx(2e6)  # once, not twice
    assert sum(r.occupancy_s for r in result.job_hours) == pytest.approx(3600)


def test_a_pod_that_requested_no_gpu_is_the_gpus_own_time_and_the_workload_keeps_its_share() -> None:
    # given a workload for the hour's first half and, after it, the scrape target's own pod on the GPU's series
    work = _gpu("UUID", "Hostname", {"pod": "train-0", "namespace": "ml"})
    monitor = _gpu("UUID", "Hostname", {"pod": "gpu-monitor-x", "namespace": "monitoring", "container": "agent"})
    data = HourInput(hour_start=T0, scrape_interval_s=S)
    data.dcgm_energy = [_energy(work, 1e9, 1e9 + 1.5e9, 1e9)]  # 1.5 MJ
    data.dcgm_series = [
        ("samples", work, 120), ("power_sum", work, 120 * 600.0), ("first", work, T0), ("last", work, T0 + 1785),
        ("samples", monitor, 120), ("power_sum", monitor, 120 * 150.0), ("first", monitor, T0 + 1800),
        ("last", monitor, T0 + 3585),
    ]  # fmt: skip
    # and kube-state-metrics listing both pods, the monitor requesting no GPU; a pod it does not list is believed
    data.pod_claims = PodClaims(
        known=frozenset({("ml", "train-0"), ("monitoring", "gpu-monitor-x")}), gpus={("ml", "train-0"): 1.0}
    )
    assert not data.pod_claims.holds_no_gpu("k8s/other/unlisted") and not data.pod_claims.holds_no_gpu("slurm/1")
    # when
    result = hour_compute(data)
    # then the workload takes its power's share, the rest is the GPU's idle energy, and the monitor is named
    (row,) = result.job_hours
    assert row.job_key == "k8s/ml/train-0"
    assert row.energy_by_method == {"whole_gpu": pytest.approx(1.5e6 * 600 / 750)}
    (gpu_hour,) = result.gpu_hours
    assert gpu_hour.idle_energy_j == pytest.approx(1.5e6 * 150 / 750)
    assert result.unclaimed == [UnclaimedPod("k8s/monitoring/gpu-monitor-x", ("GPU-1",))]


def test_pod_claims_read_exported_labels_and_keep_the_largest_request() -> None:
    claims = PodClaims.from_answer(
        [
            ("known", {"exported_namespace": "ml", "exported_pod": "a", "namespace": "kube-system"}, 1.0),
            ("gpus", {"exported_namespace": "ml", "exported_pod": "a"}, 2.0),
            ("gpus", {"exported_namespace": "ml", "exported_pod": "a"}, 0.0),  # the series before scheduling
            ("known", {"namespace": "ml", "pod": "b"}, 1.0),
        ]
    )
    assert claims.known == {("ml", "a"), ("ml", "b")} and claims.gpus == {("ml", "a"): 2.0}
    assert claims.holds_no_gpu("k8s/ml/b") and not claims.holds_no_gpu("k8s/ml/a")


def test_a_gpu_without_an_energy_meter_keeps_its_utilisation_memory_and_who_held_it() -> None:
    # given a vGPU guest: a pod's series for the first 20 minutes, then the GPU's own; no power, no energy
    pod = _gpu("UUID", "Hostname", {"pod": "notebook-1", "namespace": "lab"})
    own = _gpu("UUID", "Hostname")
    data = HourInput(hour_start=T0, scrape_interval_s=S)
    data.dcgm_series = [("present", pod, 80), ("present", own, 160)]
    data.unmetered_signals = [
        ("samples", pod, 80), ("util", pod, 90.0), ("fb_avg", pod, 30_000.0), ("fb_max", pod, 38_000.0),
        ("samples", own, 160), ("util", own, 0.0), ("fb_avg", own, 0.0), ("fb_max", own, 0.0),
    ]  # fmt: skip
    # when
    result = hour_compute(data)
    # then no energy row, and what is known: the hour's mean utilisation and memory, the pod's 20 minutes
    assert result.gpu_hours == [] and result.job_hours == []
    (gpu,) = result.meterless
    assert gpu.missing == ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_USAGE")
    assert gpu.utilisation_pct == pytest.approx(30.0) and gpu.memory_used_mib == pytest.approx(10_000.0)
    assert gpu.memory_peak_mib == 38_000.0
    assert gpu.seen_s == pytest.approx(3600.0) and gpu.jobs_s == (("k8s/lab/notebook-1", 1200.0),)


def test_mig_instance_series_repeat_the_parent_energy_and_count_once() -> None:
    parent = _gpu("UUID", "Hostname")
    instance = _gpu("UUID", "Hostname", {"GPU_I_ID": "1", "GPU_I_PROFILE": "1g.5gb"})
    data = HourInput(hour_start=T0, scrape_interval_s=S)
    data.dcgm_energy = [_energy(parent, 7e8, 7e8 + 9e8, 7e8), _energy(instance, 7e8, 7e8 + 9e8, 7e8)]
    result = hour_compute(data)
    (gpu_hour,) = result.gpu_hours
    assert gpu_hour.device_energy_j == pytest.approx(9e5)
    assert gpu_hour.unobserved_j == pytest.approx(9e5)  # no job label: not guessed, not idle
    assert gpu_hour.unattributed_j == 0.0
