"""Writing the simulator's series (apps/simulator/exposition.py): OpenMetrics history with each family in one block
and label values escaped, Prometheus text with the very same timestamps in milliseconds, the live page, and the
truth file. Read by the real engines: tests/conftest.py's history loaders."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from apps.simulator.engine import FleetSimulation, Series
from apps.simulator.exposition import import_text_write, openmetrics_write, text_exposition, truth_write
from apps.simulator.scenario import scenario_from_dict

SERIES = [
    Series("fleetwatt_gpu_energy_joules_total", {"hostname": 'a"b\\c\nd', "gpu": "0"}, np.array([1.0005, 16.0]),
           np.array([0.5, 1.25])),
    Series("fleetwatt_gpu_power_watts", {"hostname": "n", "gpu": "0"}, np.array([1.0]), np.array([300.0])),
    Series("fleetwatt_gpu_energy_joules_total", {"hostname": "m", "gpu": "1"}, np.array([2.0]), np.array([7.0])),
    Series("fleetwatt_gpu_power_watts", {"hostname": "empty", "gpu": "0"}, np.array([]), np.array([])),
]  # fmt: skip


def test_openmetrics_keeps_a_family_in_one_block_and_reads_back() -> None:
    out = io.StringIO()
    written = openmetrics_write(SERIES, out, extra_labels={"job": "sim"})
    text = out.getvalue()
    assert written == 4 and text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(text)}
    energy = families["fleetwatt_gpu_energy_joules"]
    assert energy.type == "counter" and len(energy.samples) == 3
    # the escaped label value reads back as it was, with the extra label
    first = energy.samples[0]
    assert first.labels == {"hostname": 'a"b\\c\nd', "gpu": "0", "job": "sim"}
    assert float(first.timestamp) == 1.0  # to the millisecond
    assert "empty" not in text  # a series with no samples writes nothing


def test_the_import_text_has_the_openmetrics_timestamps_in_milliseconds() -> None:
    om, text = io.StringIO(), io.StringIO()
    openmetrics_write(SERIES, om)
    import_text_write(SERIES, text)
    om_stamps = re.findall(r" (\d+)\.(\d{3})\n", om.getvalue())
    ms_stamps = re.findall(r" (\d+)\n", text.getvalue())
    assert ms_stamps == ["1000", "16000", "1000", "2000"]  # in the series' order
    assert sorted(a + b for a, b in om_stamps) == sorted(ms_stamps)  # the same digits
    samples = [s for f in text_string_to_metric_families(text.getvalue()) for s in f.samples]
    assert [(s.labels["hostname"], s.value) for s in samples] == [
        ('a"b\\c\nd', 0.5), ('a"b\\c\nd', 1.25), ("n", 300.0), ("m", 7.0)
    ]  # fmt: skip


def test_the_live_page_is_one_instant_of_every_series() -> None:
    raw = {"start": "2026-11-02T00:00:00Z", "duration": "1h", "nodes": [{"hostname": "a", "gpus": 1}],
           "jobs": [{"scheduler": "slurm", "job_id": "1", "node": "a", "start": "5m", "end": "50m"}]}  # fmt: skip
    sim = FleetSimulation(scenario_from_dict(raw))
    families = {f.name: f for f in text_string_to_metric_families(text_exposition(sim, 1800))}
    assert {"fleetwatt_gpu_energy_joules", "fleetwatt_job_energy_joules", "DCGM_FI_DEV_POWER_USAGE"} <= set(families)
    assert all(len({tuple(sorted(s.labels.items())) for s in f.samples}) == len(f.samples) for f in families.values())


def test_the_truth_file_has_every_job_with_its_coverage(tmp_path: Path) -> None:
    raw = {"start": "2026-11-02T00:00:00Z", "duration": "1h", "nodes": [{"hostname": "a", "gpus": 1}],
           "jobs": [{"scheduler": "slurm", "job_id": "1", "node": "a", "start": "5m", "end": "50m"}]}  # fmt: skip
    sim = FleetSimulation(scenario_from_dict(raw))
    truth_write(sim, tmp_path / "truth.json")
    doc = json.loads((tmp_path / "truth.json").read_text())
    assert (doc["duration_s"], list(doc["jobs"])) == (3600, ["slurm/1"])
    assert doc["jobs"]["slurm/1"]["coverage"] == 1.0 and doc["jobs"]["slurm/1"]["attribution"] == "whole_gpu"
