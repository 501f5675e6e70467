"""A big cluster's node groups and one hour's answers put back together (apps.telemetry.shards, pure)."""

from __future__ import annotations

import json
import math
import zlib

import pytest
from django.core.exceptions import ValidationError

from apps.telemetry import promql
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import HourInput, SeriesWindow
from apps.telemetry.models import ClusterShard
from apps.telemetry.shards import (
    Shard,
    ShardOverlapError,
    cluster_shards,
    hour_input_from_json,
    hour_input_json,
    hour_inputs_merge,
    staged_bytes,
    staged_read,
)


def test_a_cluster_without_shards_is_fetched_whole() -> None:
    assert cluster_shards([]) == [Shard("all", "")]


def test_the_nodes_no_pattern_names_form_the_rest_shard() -> None:
    shards = cluster_shards([("rack2", "gpu-b[0-9]+"), ("rack1", "gpu-a.*")])
    assert shards == [
        Shard("rack1", '=~"gpu-a.*"'),
        Shard("rack2", '=~"gpu-b[0-9]+"'),
        Shard("rest", '!~"(?:gpu-a.*)|(?:gpu-b[0-9]+)"'),
    ]


def test_a_shard_s_queries_name_its_nodes_in_each_exporter_s_label() -> None:
    queries = promql.HourQueries(
        cluster_selector='cluster="x"', scrape_interval_s=15, lookback_s=10800, node_match='=~"gpu-a.*"'
    )
    assert 'fleetwatt_gpu_energy_joules_total{cluster="x",hostname=~"gpu-a.*"}' in queries.counter_window(
        promql.GPU_ENERGY
    )
    assert 'DCGM_FI_DEV_POWER_USAGE{cluster="x",Hostname=~"gpu-a.*"}' in queries.dcgm_series()
    assert 'DCGM_FI_DEV_POWER_USAGE{cluster="x",Hostname=~"gpu-a.*",pod!=""}' in queries.dcgm_series()


def _answers(host: str, *, raw: bool = False) -> HourInput:
    window = CounterWindow(last=7.25, anchor=1.0, minimum=0.5, resets=1.0 if raw else 0.0)
    if raw:
        window.raw = [(1_762_041_600.0, 0.5), (1_762_041_615.0, 0.1 + 0.2)]
    return HourInput(
        hour_start=1_762_041_600.0,
        scrape_interval_s=15,
        counters={promql.GPU_ENERGY: [SeriesWindow({"hostname": host, "uuid": f"GPU-{host}"}, window)]},
        dcgm_energy=[SeriesWindow({"Hostname": host, "UUID": f"GPU-{host}"}, CounterWindow(last=3.0))],
        job_gauges=[("memory", {"hostname": host, "job_key": "slurm/1"}, 1e9)],
        job_info=[{"hostname": host, "job_key": "slurm/1"}],
        agent_info=[{"hostname": host, "version": "1.5.0"}],
        dcgm_series=[("power_sum", {"Hostname": host, "UUID": f"GPU-{host}"}, 123.456)],
    )


META = {"retention_s": None, "query_count": 13, "prometheus_s": 0.25}


def test_a_staged_answer_comes_back_exactly() -> None:
    data = _answers("gpu-a1", raw=True)
    data.counters[promql.GPU_IDLE_ENERGY] = [SeriesWindow({"hostname": "gpu-a1", "uuid": "GPU-x"}, CounterWindow())]
    assert staged_read(staged_bytes(data, META)) == (data, META)


def test_a_staged_answer_keeps_its_work_counters_and_the_rest_shard_brings_them() -> None:
    # given the `rest` shard's answer with a serving engine's counter (a restart: its raw samples too)
    rest = _answers("gpu-r1")
    labels = {"namespace": "ns", "pod": "p", promql.WORK_TAG: "vllm/output_tokens", promql.MODEL_TAG: "llama"}
    rest.work = [SeriesWindow(labels, CounterWindow(last=5.0, anchor=9.0, minimum=1.0, resets=1.0, raw=[(1.0, 5.0)]))]
    # then it comes back from staging, and the merged hour holds it once
    assert staged_read(staged_bytes(rest, META)) == (rest, META)
    merged = hour_inputs_merge({"a": _answers("gpu-a1"), "rest": rest})
    assert merged.work == rest.work


def test_nan_and_infinities_come_back_as_they_were_answered() -> None:
    # JSON has no word for them: orjson would write null (a window with no sample), so such a shard goes
    # through the standard library's NaN and Infinity
    data = _answers("gpu-a1", raw=True)
    data.counters[promql.GPU_ENERGY][0].window.minimum = math.inf
    data.counters[promql.GPU_ENERGY][0].window.raw = [(1_762_041_600.0, math.nan)]
    data.job_gauges.append(("start", {"hostname": "gpu-a1", "job_key": "slurm/1"}, -math.inf))
    back, meta = staged_read(staged_bytes(data, META))
    window = back.counters[promql.GPU_ENERGY][0].window
    assert window.minimum == math.inf and math.isnan(window.raw[0][1]) and back.job_gauges[-1][2] == -math.inf
    assert meta == META


def test_a_shard_staged_in_the_first_form_is_still_read() -> None:
    # a batch staged by the release before (one object per series, zlib-compressed JSON) finishes after an upgrade
    data = _answers("gpu-a1", raw=True)
    assert hour_input_from_json(hour_input_json(data)) == data
    first_form = zlib.compress(json.dumps({**hour_input_json(data), "_meta": META}).encode())
    assert staged_read(first_form) == (data, META)


def test_shards_merge_into_one_answer_in_shard_order() -> None:
    merged = hour_inputs_merge({"b": _answers("gpu-b1"), "a": _answers("gpu-a1")})
    assert [sw.labels["hostname"] for sw in merged.counters[promql.GPU_ENERGY]] == ["gpu-a1", "gpu-b1"]
    assert [labels["hostname"] for labels in merged.agent_info] == ["gpu-a1", "gpu-b1"]
    assert len(merged.dcgm_energy) == len(merged.dcgm_series) == 2


def test_a_node_in_two_shards_is_refused() -> None:
    with pytest.raises(ShardOverlapError, match="node gpu-a1 is in shards a and rest"):
        hour_inputs_merge({"a": _answers("gpu-a1"), "rest": _answers("gpu-a1")})


@pytest.mark.parametrize(
    ("name", "pattern", "field"),
    [("rest", "gpu-.*", "name"), ("a", "gpu-(a", "node_pattern"), ("a", "gpu-(?!b).*", "node_pattern"),
     ("a", r"(gpu)-\1", "node_pattern")],
    ids=["reserved", "not-a-regex", "look-ahead", "back-reference"],
)  # fmt: skip
def test_a_shard_prometheus_cannot_run_is_refused_in_the_admin(name: str, pattern: str, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ClusterShard(name=name, node_pattern=pattern).clean()
    assert field in raised.value.message_dict
