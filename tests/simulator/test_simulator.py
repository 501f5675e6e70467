"""The fleet simulator on its own: the agent's invariant, its formats, scenario validation."""

from __future__ import annotations

import io

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.simulator.engine import FleetSimulation
from apps.simulator.exposition import openmetrics_write, text_exposition
from apps.simulator.scenario import ScenarioError, scenario_from_dict, scenario_load
from tests.scenarios import spine_scenario


def test_jobs_plus_idle_equal_gpu_energy_every_second() -> None:
    sim = FleetSimulation(scenario_from_dict(spine_scenario()))
    for gpu in sim.gpus:
        if not gpu.node.agent:
            continue
        device = gpu.rates[("gpu_energy",)]
        parts = gpu.rates.get(("idle",), np.zeros(len(device))) + sum(
            (rate for key, rate in gpu.rates.items() if key[0] == "job_energy"), np.zeros(len(device))
        )
        np.testing.assert_allclose(parts, device, rtol=1e-12)


def test_openmetrics_is_grouped_by_family_and_ends_with_eof() -> None:
    sim = FleetSimulation(scenario_from_dict({**spine_scenario(), "duration": "1h"}))
    out = io.StringIO()
    written = openmetrics_write(sim.series(), out)
    text = out.getvalue()
    assert text.endswith("# EOF\n")
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(families) == len(set(families))
    assert written == sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    assert "# TYPE fleetwatt_gpu_energy_joules counter" in text
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown" in text


def test_live_page_parses_as_prometheus_text() -> None:
    sim = FleetSimulation(scenario_from_dict(spine_scenario()))
    families = {f.name: f for f in text_string_to_metric_families(text_exposition(sim, 2 * 3600 + 30))}
    assert {"fleetwatt_gpu_energy_joules", "fleetwatt_job_energy_joules", "DCGM_FI_DEV_POWER_USAGE"} <= families.keys()
    pods = {s.labels.get("pod") for s in families["DCGM_FI_DEV_POWER_USAGE"].samples}
    assert {"ranker-0", "embed-0", "trainer-0"} <= pods  # dcgm-exporter's copies, one per pod


def test_two_pods_sharing_a_gpu_get_copies_of_its_power_and_energy() -> None:
    raw = spine_scenario()
    sim = FleetSimulation(scenario_from_dict(raw))
    gpu = next(g for g in sim.gpus if g.node.hostname == "k8s-dcgm" and g.index == 0)
    at = np.array([2 * 3600.0])
    energy = [s for s in sim.dcgm_series(gpu, at) if s.family == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert len(energy) == 2 and energy[0].values[0] == energy[1].values[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"duration": "soon"}, "not a duration"),
        ({"scrape_interval_s": 7}, "must divide an hour"),
        ({"jobs": [{"scheduler": "slurm", "job_id": "1", "node": "ghost"}]}, "unknown node"),
        ({"jobs": [{"scheduler": "lsf", "node": "slurm-a"}]}, "scheduler"),
        ({"faults": [{"kind": "meteor", "node": "slurm-a"}]}, "kind"),
        ({"start": "2026-11-02T00:00:00"}, "time zone"),
    ],
)
def test_bad_scenarios_say_where(change: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario_from_dict({**spine_scenario(), **change})


def test_the_demo_scenario_has_every_case() -> None:
    sc = scenario_load("demo")
    assert len(sc.nodes) == 16 and all(n.gpus == 8 for n in sc.nodes)
    assert {f.kind for f in sc.faults} == {"agent_down", "counter_reset"}
    assert any(not n.agent and n.dcgm_pod_labels for n in sc.nodes)
    assert {"slurm", "k8s"} <= {j.scheduler for j in sc.jobs}
    assert len({j.account or j.namespace for j in sc.jobs}) >= 5
