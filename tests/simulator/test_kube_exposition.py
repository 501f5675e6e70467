"""The simulator's kube-state-metrics series: one pod's life as kube-state-metrics v2 exports it, on the live
page and in the OpenMetrics history."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.simulator.engine import KSM_FAMILIES, FleetSimulation, Series
from apps.simulator.exposition import openmetrics_write, text_exposition
from apps.simulator.scenario import scenario_from_dict

MIN = 60


def scenario(**job: Any) -> dict[str, Any]:
    """One Kubernetes pod on a node of 4 GPUs, running from 10 to 40 minutes of an hour."""
    pod = {"scheduler": "k8s", "namespace": "search", "pod": "train-1-x7k2p", "node": "k8s-a", "gpus": [0, 1],
           "start": "10m", "end": "40m", "owner_kind": "Job", "owner_name": "train-1",
           "labels": {"team": "search", "app.kubernetes.io/name": "trainer"}}  # fmt: skip
    return {
        "name": "ksm",
        "start": "2026-11-02T00:00:00Z",
        "duration": "1h",
        "scrape_interval_s": 15,
        "linger_s": 120,
        "nodes": [{"hostname": "k8s-a", "gpus": 4}],
        "jobs": [{**pod, **job}],
    }


def at(sim: FleetSimulation, seconds: float) -> dict[str, list[Series]]:
    """The kube-state-metrics series of one scrape, by family."""
    found: dict[str, list[Series]] = {}
    for s in sim.kube_series(np.array([float(seconds)])):
        found.setdefault(s.family, []).append(s)
    return found


def phase_at(sim: FleetSimulation, seconds: float) -> str:
    ones = [s.labels["phase"] for s in at(sim, seconds)["kube_pod_status_phase"] if s.values[0] == 1]
    assert len(ones) == 1
    return ones[0]


def test_a_pod_goes_from_pending_to_running_to_succeeded_and_is_gone_after_its_linger() -> None:
    sim = FleetSimulation(scenario_from_dict(scenario()))
    t0 = sim.sc.t0
    assert at(sim, 8 * MIN) == {}  # before its submit, a minute before its start
    assert phase_at(sim, 9 * MIN + 15) == "Pending"
    assert phase_at(sim, 10 * MIN) == phase_at(sim, 40 * MIN - 1) == "Running"
    assert phase_at(sim, 40 * MIN) == phase_at(sim, 42 * MIN - 1) == "Succeeded"
    assert at(sim, 42 * MIN) == {}  # deleted linger_s after its end

    pending, running, done = at(sim, 9 * MIN + 15), at(sim, 20 * MIN), at(sim, 41 * MIN)
    # every phase is a series of its own, 1 for the current one
    assert [s.labels["phase"] for s in running["kube_pod_status_phase"]] == [
        "Pending", "Succeeded", "Failed", "Unknown", "Running"
    ]  # fmt: skip
    # times: created at its submit, started at its start, completed at its end, once there
    assert pending["kube_pod_created"][0].values[0] == t0 + 9 * MIN
    assert "kube_pod_start_time" not in pending and "kube_pod_completion_time" not in running
    assert running["kube_pod_start_time"][0].values[0] == t0 + 10 * MIN
    assert done["kube_pod_completion_time"][0].values[0] == t0 + 40 * MIN
    assert "kube_pod_container_status_terminated_reason" not in running
    assert done["kube_pod_container_status_terminated_reason"][0].labels["reason"] == "Completed"


def test_series_carry_kube_state_metrics_labels() -> None:
    sim = FleetSimulation(scenario_from_dict(scenario()))
    series = at(sim, 20 * MIN)
    pod = {k: series["kube_pod_info"][0].labels[k] for k in ("namespace", "pod", "uid")}
    assert pod["namespace"] == "search" and pod["pod"] == "train-1-x7k2p" and len(pod["uid"]) == 36
    for family in KSM_FAMILIES:
        for s in series.get(family, []):
            assert list(s.labels)[:3] == ["namespace", "pod", "uid"] and all(s.labels.values()), family
    info = series["kube_pod_info"][0].labels
    assert (info["node"], info["created_by_kind"], info["created_by_name"]) == ("k8s-a", "Job", "train-1")
    assert "pod_ip" in info and "pod_ip" not in at(sim, 9 * MIN + 15)["kube_pod_info"][0].labels  # set on start
    labels = series["kube_pod_labels"][0].labels
    assert (labels["label_team"], labels["label_app_kubernetes_io_name"]) == ("search", "trainer")
    owner = series["kube_pod_owner"][0].labels
    assert (owner["owner_kind"], owner["owner_name"], owner["owner_is_controller"]) == ("Job", "train-1", "true")
    request = series["kube_pod_container_resource_requests"][0]
    assert {k: request.labels[k] for k in ("container", "node", "resource", "unit")} == {
        "container": "main", "node": "k8s-a", "resource": "nvidia_com_gpu", "unit": "integer"
    }  # fmt: skip
    assert request.values[0] == 2  # the GPUs it runs on


@pytest.mark.parametrize(
    ("state", "phase", "reason"),
    [("out_of_memory", "Failed", "OOMKilled"), ("failed", "Failed", "Error"), ("timeout", "Failed", "Error")],
)
def test_a_pod_that_did_not_complete_fails_with_its_container_s_reason(state: str, phase: str, reason: str) -> None:
    sim = FleetSimulation(scenario_from_dict(scenario(state=state)))
    assert phase_at(sim, 41 * MIN) == phase
    assert at(sim, 41 * MIN)["kube_pod_container_status_terminated_reason"][0].labels["reason"] == reason


def test_requests_bare_pods_and_pods_still_running_at_the_end() -> None:
    sim = FleetSimulation(scenario_from_dict(scenario(gpus_requested=4, owner_kind="", owner_name="", end="1h")))
    last = at(sim, 3600 - 15)
    assert last["kube_pod_container_resource_requests"][0].values[0] == 4
    assert last["kube_pod_owner"][0].labels["owner_kind"] == "<none>"
    assert last["kube_pod_info"][0].labels["created_by_kind"] == "<none>"
    assert phase_at(sim, 3600 - 15) == "Running" and "kube_pod_completion_time" not in last


def test_slurm_jobs_and_pods_without_a_namespace_have_no_pod_series() -> None:
    raw = scenario(namespace="")
    raw["jobs"].append({"scheduler": "slurm", "job_id": "7", "node": "k8s-a", "gpus": [3], "start": "5m", "end": "50m"})
    sim = FleetSimulation(scenario_from_dict(raw))
    assert list(sim.kube_series(sim.scrapes)) == []


def test_the_live_page_and_the_history_carry_the_pod_series_as_gauges() -> None:
    sim = FleetSimulation(scenario_from_dict(scenario()))
    families = {f.name: f for f in text_string_to_metric_families(text_exposition(sim, 20 * MIN))}
    assert {f: families[f].type for f in KSM_FAMILIES if f in families} == dict.fromkeys(
        set(KSM_FAMILIES) - {"kube_pod_completion_time", "kube_pod_container_status_terminated_reason"}, "gauge"
    )
    out = io.StringIO()
    written = openmetrics_write(sim.series(), out)
    text = out.getvalue()
    assert "# TYPE kube_pod_status_phase gauge" in text and text.endswith("# EOF\n")
    assert written == sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    # one sample per scrape per series while the pod exists: 5 phases, from 9m to 42m at 15 s
    phases = [line for line in text.splitlines() if line.startswith("kube_pod_status_phase{")]
    assert len(phases) == 5 * (42 - 9) * 4
