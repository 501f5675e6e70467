"""The simulator's engine (apps/simulator/engine.py): every GPU's energy conserved between its jobs and its idle time,
counters that never go back within an agent's life, an outage the agent did not see (and the truth saying so), a
power limit that caps the draw, a driver reload that restarts DCGM's counter, a pod's phases as kube-state-metrics
gives them; and the right answers it keeps for the ingest's tests. Per second on the spine scenario:
tests/simulator/test_simulator.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from apps.simulator.engine import (
    DCGM_ENERGY,
    GPU_ENERGY,
    GPU_POWER,
    JOB_ENERGY,
    KSM_POD_COMPLETION_TIME,
    KSM_POD_PHASE,
    FleetSimulation,
    JobTruth,
)
from apps.simulator.scenario import scenario_from_dict

HOUR = 3600


def _raw(**extra: Any) -> dict[str, Any]:
    return {
        "start": "2026-11-02T00:00:00Z",
        "duration": "3h",
        "linger_s": 60,
        "nodes": [{"hostname": "a", "gpus": 2}, {"hostname": "k", "gpus": 1, "agent": False}],
        "jobs": [
            {"scheduler": "slurm", "job_id": "1", "node": "a", "gpus": [0], "start": "10m", "end": "2h30m",
             "sm": [[0, 90], ["1h", 40]], "power_w": [[0, 600], ["1h", 300]]},
            {"scheduler": "slurm", "job_id": "2", "node": "a", "gpus": [0, 1], "start": "1h", "end": "2h",
             "sm": 30, "power_w": 450},
            {"scheduler": "k8s", "namespace": "ml", "pod": "p-0", "node": "k", "gpus": [0], "start": "20m",
             "end": "1h20m", "state": "out_of_memory", "owner_kind": "Job", "owner_name": "p"},
        ],
        **extra,
    }  # fmt: skip


@pytest.fixture(scope="module")
def sim() -> FleetSimulation:
    return FleetSimulation(scenario_from_dict(_raw()))


def test_each_gpus_energy_is_its_jobs_plus_its_idle_time(sim: FleetSimulation) -> None:
    for gpu in sim.gpus:
        widths = np.diff(gpu.bps)
        idle = sum(p * w for p, w, here in zip(gpu.power_w, widths, gpu.present, strict=True) if not here)
        jobs = sum(cum[-1] for key, cum in gpu.cumulative.items() if key[0] == "physical")
        assert jobs + idle == pytest.approx(gpu.cumulative[("dcgm",)][-1], rel=1e-12)


def test_the_agents_counters_never_go_back_within_its_life(sim: FleetSimulation) -> None:
    for gpu in sim.gpus:
        for series in sim.agent_series(gpu, sim.scrapes):
            if series.family.endswith("_total"):
                assert np.all(np.diff(series.values) >= 0), series.family


def test_what_the_agent_counted_is_what_the_truth_says(sim: FleetSimulation) -> None:
    truth = sim.truth()
    job = truth["slurm/1"]
    counted = sum(
        float(s.values[-1]) for g in sim.gpus for s in sim.agent_series(g, sim.scrapes)
        if s.family == JOB_ENERGY and s.labels["job_key"] == "slurm/1"
    )  # fmt: skip
    assert job.energy_j == pytest.approx(counted)
    assert (job.source, job.gpus, job.coverage) == ("agent", 1, pytest.approx(1.0))
    assert job.attribution in ("whole_gpu", "sm_time")
    # the pod on the node without an agent: DCGM's meter, whole
    pod = truth["k8s/ml/p-0"]
    assert (pod.source, pod.attribution, pod.coverage) == ("dcgm", "whole_gpu", 1.0)
    assert pod.energy_j == pytest.approx(pod.physical_energy_j)


def test_an_outage_the_agent_did_not_see_leaves_a_gap_the_truth_knows() -> None:
    sim = FleetSimulation(scenario_from_dict(_raw(faults=[{"kind": "agent_down", "node": "a", "start": "1h",
                                                           "end": "1h30m"}])))  # fmt: skip
    gpu = next(g for g in sim.gpus if g.node.hostname == "a" and g.index == 0)
    energy = [s for s in sim.agent_series(gpu, sim.scrapes) if s.family == GPU_ENERGY]
    assert len(energy) == 2  # one series per agent life, each counting from 0
    assert all(not ((s.times - sim.sc.t0 > HOUR) & (s.times - sim.sc.t0 < 1.5 * HOUR)).any() for s in energy)
    job = sim.truth()["slurm/1"]
    assert job.coverage == pytest.approx(1 - 1800 / job.expected_s, abs=0.01)
    assert job.energy_j < job.physical_energy_j


def test_a_power_limit_caps_the_draw() -> None:
    sim = FleetSimulation(scenario_from_dict(_raw(power_limits=[{"node": "a", "at": "30m", "watts": 400}])))
    gpu = next(g for g in sim.gpus if g.node.hostname == "a" and g.index == 0)
    [power] = [s for s in sim.agent_series(gpu, sim.scrapes) if s.family == GPU_POWER]
    since = power.times - sim.sc.t0
    assert power.values[since > 1800].max() == 400.0
    assert power.values[since < 1800].max() == 600.0


def test_a_driver_reload_restarts_dcgms_counter() -> None:
    sim = FleetSimulation(
        scenario_from_dict(_raw(faults=[{"kind": "counter_reset", "node": "a", "at": "1h", "gpu": 0}]))
    )
    gpu = next(g for g in sim.gpus if g.node.hostname == "a" and g.index == 0)
    [dcgm] = [s for s in sim.dcgm_series(gpu, sim.scrapes) if s.family == DCGM_ENERGY]
    drops = np.flatnonzero(np.diff(dcgm.values) < 0)
    assert len(drops) == 1 and dcgm.times[drops[0] + 1] - sim.sc.t0 == pytest.approx(HOUR, abs=15)


def test_a_pod_is_pending_running_then_failed_with_its_completion_after_its_end(sim: FleetSimulation) -> None:
    series = list(sim.kube_series(sim.scrapes))
    phases = {s.labels["phase"]: s for s in series if s.family == KSM_POD_PHASE}
    since = phases["Running"].times - sim.sc.t0
    current = [next(name for name, s in phases.items() if s.values[i] == 1) for i in range(len(since))]
    assert current[0] == "Pending" and current[-1] == "Failed"
    assert [p for i, p in enumerate(current) if i == 0 or p != current[i - 1]] == ["Pending", "Running", "Failed"]
    [completion] = [s for s in series if s.family == KSM_POD_COMPLETION_TIME]
    assert set(completion.values) == {sim.sc.t0 + 80 * 60}
    assert since[-1] < 80 * 60 + sim.sc.linger_s


def test_the_scrapes_divide_the_scenario_and_the_truth_of_an_empty_job() -> None:
    sim = FleetSimulation(scenario_from_dict({**_raw(), "scrape_offset_s": 5}))
    assert sim.scrapes[0] == 5 and np.all(np.diff(sim.scrapes) == 15) and sim.scrapes[-1] < 3 * HOUR
    empty = JobTruth(job_key="x", source="agent")
    assert (empty.coverage, empty.attribution) == (0.0, "")
