"""Fleet scenarios (apps/simulator/scenario.py): durations, step profiles, the scenario read whole (its defaults,
its `now`-relative start, its generated workload, deterministic and valid) and every wrong part named; the shipped
scenarios load. The simulator on such a scenario: tests/simulator/test_simulator.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.simulator.scenario import (
    JobSpec,
    ScenarioError,
    parse_duration,
    profile_at,
    scenario_from_dict,
    scenario_load,
    scenario_names,
)

NOW = datetime(2026, 11, 2, 10, 42, tzinfo=UTC)
NODE = {"hostname": "n1", "gpus": 2}


def _scenario(**raw: Any) -> Any:
    return scenario_from_dict({"start": "2026-11-02T00:00:00Z", "duration": "6h", "nodes": [NODE], **raw}, now=NOW)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("90s", 90), ("2h30m", 9000), ("1d2h", 93600), (" 1h 5s ", 3605), (42, 42), (7.9, 7), ("0s", 0)],
)
def test_a_duration_in_seconds(value: object, seconds: int) -> None:
    assert parse_duration(value, "x") == seconds


@pytest.mark.parametrize("value", ["soon", "", "5", "1h2", "2m1h", True])
def test_what_is_not_a_duration_is_named(value: object) -> None:
    with pytest.raises(ScenarioError, match=r"where: .* is not a duration"):
        parse_duration(value, "where")


def test_a_step_profile_holds_each_value_until_the_next_step() -> None:
    profile = [(0, 90.0), (3600, 50.0), (7200, 10.0)]
    assert [profile_at(profile, t) for t in (0, 3599, 3600, 7199.5, 10**6)] == [90.0, 90.0, 50.0, 50.0, 10.0]
    assert profile_at([(0, 7.0)], -5) == 7.0


def test_a_scenario_with_its_defaults() -> None:
    sc = _scenario(jobs=[{"scheduler": "slurm", "job_id": "1", "node": "n1"}])
    assert (sc.duration_s, sc.scrape_interval_s, sc.linger_s, sc.tdp_w) == (6 * 3600, 15, 300, 700.0)
    [job] = sc.jobs
    assert (job.gpus, job.start_s, job.end_s, job.state, job.partition) == ([0], 0, 6 * 3600, "completed", "gpu")
    assert (job.sm, job.power_w, job.memory_bytes) == ([(0, 50.0)], [(0, 400.0)], 10 * 1024**3)


def test_a_start_relative_to_now_is_from_the_current_hour() -> None:
    assert scenario_from_dict({"start": "now-1d"}, now=NOW).start == datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert scenario_from_dict({"start": "now"}, now=NOW).start == datetime(2026, 11, 2, 10, tzinfo=UTC)
    assert scenario_from_dict({"start": "2026-11-02T12:00:00+02:00"}).start == datetime(2026, 11, 2, 10, tzinfo=UTC)


def test_nodes_by_count_are_numbered_and_gpus_have_stable_uuids() -> None:
    sc = _scenario(nodes=[{"prefix": "gpu-", "count": 3, "gpus": 4}])
    assert [n.hostname for n in sc.nodes] == ["gpu-01", "gpu-02", "gpu-03"]
    uuid = sc.gpu_uuid("gpu-01", 0)
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", uuid)
    assert uuid == sc.gpu_uuid("gpu-01", 0) != sc.gpu_uuid("gpu-01", 1)
    with pytest.raises(KeyError):
        sc.node("gpu-04")


@pytest.mark.parametrize(
    ("scheduler", "fields", "key"),
    [
        ("slurm", {"job_id": "42"}, "slurm/42"),
        ("k8s", {"namespace": "ml", "pod": "p-0"}, "k8s/ml/p-0"),
        ("container", {"job_id": "0123456789abcdef"}, "container/0123456789ab"),
        ("proc", {"job_id": "77-1"}, "proc/77-1"),
    ],
)
def test_a_jobs_key_is_the_agents(scheduler: str, fields: dict[str, str], key: str) -> None:
    job = JobSpec(scheduler=scheduler, node="n1", gpus=[0], start_s=0, end_s=1, sm=[(0, 1.0)], power_w=[(0, 1.0)],
                  memory_bytes=0, **fields)  # fmt: skip
    assert job.job_key == key


def test_a_generated_workload_is_the_same_every_time_and_valid() -> None:
    raw = {"nodes": [{"prefix": "gpu-", "count": 2, "gpus": 2}], "duration": "2d",
           "generate": {"seed": 7, "teams": [{"account": "vision", "users": ["ada"]},
                                             {"namespace": "ml", "scheduler": "k8s"}]}}  # fmt: skip
    first, again = _scenario(**raw), _scenario(**raw)
    assert [(j.job_key, j.start_s, j.end_s, j.state) for j in first.jobs] == [
        (j.job_key, j.start_s, j.end_s, j.state) for j in again.jobs
    ]
    assert len(first.jobs) > 4 and len({j.job_key for j in first.jobs}) == len(first.jobs)
    assert all(0 <= j.start_s < j.end_s <= first.duration_s for j in first.jobs)
    assert {j.scheduler for j in first.jobs} == {"slurm", "k8s"}
    assert all(j.labels["team"] == "ml" and j.owner_kind == "Job" for j in first.jobs if j.scheduler == "k8s")


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"nodes": [NODE, NODE]}, "nodes: duplicate hostnames"),
        ({"nodes": [{**NODE, "agent_contract": "old"}]}, r"nodes\[0\].agent_contract"),
        ({"jobs": [{"node": "n1"}]}, r"jobs\[0\]: missing scheduler"),
        ({"jobs": [{"scheduler": "slurm", "job_id": "1", "node": "n1", "gpus": [2]}]}, "GPU index out of range"),
        ({"jobs": [{"scheduler": "slurm", "job_id": "1", "node": "n1", "start": "2h", "end": "1h"}]}, "start must be"),
        ({"jobs": [{"scheduler": "slurm", "job_id": "1", "node": "n1"}] * 2}, "job slurm/1: duplicate job"),
        ({"jobs": [{"scheduler": "slurm", "node": "n1", "sm": [[5, 1]]}]}, "profile times must start at 0"),
        ({"jobs": [{"scheduler": "slurm", "node": "n1", "state": "exploded"}]}, "'exploded' is not one of"),
        ({"jobs": [{"scheduler": "k8s", "node": "n1", "labels": ["a"]}]}, "a mapping of label names"),
        ({"jobs": [{"scheduler": "k8s", "node": "n1", "serving": {"engine": "tgi"}}]}, "engine: one of vllm"),
        ({"jobs": [{"scheduler": "k8s", "node": "n1", "serving": {"speed": 1}}]}, "unknown keys"),
        ({"jobs": [{"scheduler": "k8s", "node": "n1", "serving": {"unscraped": ["1h"]}}]}, "list of \\[from, to\\]"),
        ({"jobs": [{"scheduler": "k8s", "node": "n1", "serving": {"unscraped": [["2h", "1h"]]}}]}, "end must come"),
        ({"jobs": [{"scheduler": "slurm", "node": "n1", "work": {"per_s": 0}}]}, "per_s over 0"),
        ({"faults": [{"kind": "agent_down", "node": "n1", "start": "2h", "end": "1h"}]}, "end must be after start"),
        ({"faults": [{"kind": "agent_down", "node": "n9", "start": 0, "end": 9}]}, "unknown node 'n9'"),
        ({"power_limits": [{"node": "n1", "watts": 50}]}, r"power_limits\[0\].watts: above idle_power_w"),
        ({"duration": 0}, "duration must be positive"),
        ({"start": "tomorrow"}, "not an ISO time"),
    ],
)
def test_a_wrong_part_of_a_scenario_is_named(raw: dict[str, Any], said: str) -> None:
    with pytest.raises(ScenarioError, match=said):
        _scenario(**raw)


def test_the_shipped_scenario_loads_and_an_unknown_one_names_them() -> None:
    assert "demo" in scenario_names()
    assert "demo-fleet" not in scenario_names()  # a fleet config (docs/config.md), not a scenario
    sc = scenario_load("demo", now=NOW)
    assert sc.nodes and sc.jobs and sc.duration_s > 0
    with pytest.raises(ScenarioError, match=r"No scenario file 'nope' \(shipped: demo"):
        scenario_load("nope")


def test_a_counter_reset_happens_at_one_moment() -> None:
    sc = _scenario(faults=[{"kind": "counter_reset", "node": "n1", "at": "1h", "gpu": 1}])
    [fault] = sc.faults
    assert (fault.start_s, fault.end_s, fault.gpu) == (3600, 3600, 1)
    assert sc.start + timedelta(seconds=sc.duration_s) == datetime(2026, 11, 2, 6, tzinfo=UTC)


@pytest.mark.parametrize(
    "raw",
    [
        {"nodes": ["gpu-a"]},  # a node as a word, not a mapping
        {"nodes": [{"hostname": "a", "count": "many"}]},
        {"jobs": [7]},
        {"faults": [["agent_down"]]},
        {"idle_power_w": "hot"},
    ],
)
def test_a_scenario_of_the_wrong_shape_is_a_scenario_error(raw: dict[str, object]) -> None:
    with pytest.raises(ScenarioError):
        scenario_from_dict(raw)
