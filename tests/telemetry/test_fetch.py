"""apps.telemetry.fetch: one cluster-hour's queries run and their answers parsed into an HourInput, with a reader that
answers from a table (what a Prometheus would answer to each query) and keeps what it was asked. The four aggregates
of a series become one counter window; a series that reset gets its raw samples, asked once per label for every
series that reset (every copy of a dcgm GPU that did, so that the copies merge); the questions asked only when
needed are asked only then (the GPUs' settings from dcgm-exporter, the unmetered GPUs' signals, the foreign names,
the work counters, the pods' claims). The answers of a real Prometheus: tests/telemetry/test_ingest_end_to_end.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from apps.fleet.work_counters import WorkCounters
from apps.telemetry import promql
from apps.telemetry.fetch import hour_fetch, parse_counter_windows, parse_tagged
from apps.telemetry.hour import hour_compute
from apps.telemetry.promql import HourQueries

T0 = 1_793_577_600.0
AT = T0 + 3600.0


class TableReader:
    """Answers each query from `answers` (none: an empty answer), and keeps the queries it was asked."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self._lock = threading.Lock()

    def instant(self, query: str, *, at: float) -> list[dict[str, Any]]:
        assert at == AT  # every query at the hour's end
        with self._lock:
            self.asked.append(query)
        return [{"metric": dict(item["metric"]), **{k: v for k, v in item.items() if k != "metric"}}
                for item in self.answers.get(query, [])]  # fmt: skip


def _window(labels: dict[str, str], *, last: float, anchor: float | None, minimum: float, resets: float = 0.0,
            name: str = "") -> list[dict[str, Any]]:  # fmt: skip
    """The four tagged aggregates of one series, as counter_window's query answers them."""
    named = {"__name__": name} if name else {}
    parts = {"last": last, "anchor": anchor, "min": minimum, "resets": resets}
    return [
        {"metric": {**labels, **named, promql.TAG: tag}, "value": [AT, str(value)]}
        for tag, value in parts.items()
        if value is not None
    ]


def _queries(**fields: Any) -> HourQueries:
    return HourQueries(cluster_selector='{cluster="east"}', scrape_interval_s=15, lookback_s=600, **fields)


GPU = {"uuid": "GPU-1", "hostname": "gpu-a", "gpu": "0"}


def test_the_four_aggregates_of_a_series_are_one_window_and_two_series_stay_two() -> None:
    answer = _window(GPU, last=900.0, anchor=100.0, minimum=100.0, name=promql.GPU_ENERGY)
    answer += _window({**GPU, "uuid": "GPU-2"}, last=50.0, anchor=None, minimum=20.0, resets=1.0)
    windows = {w.labels["uuid"]: w for w in parse_counter_windows(answer)}
    assert windows["GPU-1"].labels == GPU  # the name and the tag are not labels of the series
    assert (windows["GPU-1"].window.last, windows["GPU-1"].window.anchor, windows["GPU-1"].window.minimum) == (
        900.0, 100.0, 100.0,
    )  # fmt: skip
    assert windows["GPU-2"].window.anchor is None and windows["GPU-2"].window.resets == 1.0


def test_a_tagged_answer_keeps_its_tag_apart_from_the_labels() -> None:
    answer = [{"metric": {"__name__": "x", promql.TAG: "memory", "uuid": "GPU-1"}, "value": [AT, "8e9"]}]
    assert parse_tagged(answer) == [("memory", {"uuid": "GPU-1"}, 8e9)]


def _agent_answers(q: HourQueries, *, reset: bool) -> dict[str, list[dict[str, Any]]]:
    """One agent GPU and one job; with `reset`, the GPU's energy counter restarted mid-hour (agent restart)."""
    job = {**GPU, "job_key": "slurm/1"}
    if reset:
        energy = _window(GPU, last=400.0, anchor=1000.0, minimum=100.0, resets=1.0)
    else:
        energy = _window(GPU, last=1900.0, anchor=1000.0, minimum=1000.0)
    return {
        q.counter_window(promql.GPU_ENERGY): energy,
        q.counter_window(promql.GPU_SAMPLED): _window(GPU, last=3600.0, anchor=0.0, minimum=0.0),
        q.counter_window(promql.JOB_ENERGY): _window(
            {**job, "method": "whole_gpu"}, last=900.0, anchor=0.0, minimum=0.0
        ),
        q.counter_window(promql.JOB_SAMPLED): _window(job, last=3600.0, anchor=0.0, minimum=0.0),
        q.counter_window(promql.JOB_OCCUPANCY): _window(job, last=3600.0, anchor=0.0, minimum=0.0),
        q.job_info(): [
            {"metric": {"job_key": "slurm/1", "user": "ada", "hostname": "gpu-a"}, "value": [AT, "1"]},
            {"metric": {"hostname": "gpu-a", "version": "1.4.0"}, "value": [AT, "1"]},
        ],
        q.job_gauges(): [
            {"metric": {**GPU, promql.TAG: "power_limit"}, "value": [AT, "700"]},
            {"metric": {**GPU, promql.TAG: "sm_clock"}, "value": [AT, "1.98e9"]},
        ],
    }


def test_an_hour_without_resets_is_its_fixed_handful_of_queries() -> None:
    q = _queries()
    reader = TableReader(_agent_answers(q, reset=False))
    data = hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    # one query per counter, the gauges, the info and dcgm's series; nothing asked only when needed
    assert len(reader.asked) == len(promql.AGENT_COUNTERS) + 1 + 3
    assert q.dcgm_settings() not in reader.asked and q.foreign_names() not in reader.asked
    assert [i["job_key"] for i in data.job_info] == ["slurm/1"]
    assert data.agent_info == [{"hostname": "gpu-a", "version": "1.4.0"}]
    (gpu,) = hour_compute(data).gpu_hours
    assert gpu.agent_energy_j == 900.0 and gpu.agent_version == "1.4.0"


def test_a_series_that_reset_gets_its_raw_samples_and_its_exact_rise() -> None:
    # given a GPU whose agent restarted mid-hour: 1000 -> 1600 (rise 600), restart, 0 -> 400 (rise 400)
    q = _queries()
    answers = _agent_answers(q, reset=True)
    raw_query = q.raw_samples(promql.GPU_ENERGY, "hostname", ["gpu-a"])
    answers[raw_query] = [
        {"metric": {**GPU, "__name__": promql.GPU_ENERGY},
         "values": [[T0 + 600, "1300"], [T0 + 1200, "1600"], [T0 + 1800, "100"], [T0 + 3600, "400"]]},
    ]  # fmt: skip
    reader = TableReader(answers)
    # when
    data = hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    # then the raw samples were asked once, by the node's name, and the hour's rise counts both sides of the reset
    assert reader.asked.count(raw_query) == 1
    (window,) = data.counters[promql.GPU_ENERGY]
    assert window.window.raw == [(T0 + 600, 1300.0), (T0 + 1200, 1600.0), (T0 + 1800, 100.0), (T0 + 3600, 400.0)]
    (gpu,) = hour_compute(data).gpu_hours
    assert gpu.agent_energy_j == 1000.0


def test_every_copy_of_a_dcgm_gpu_that_reset_gets_its_raw_samples() -> None:
    # given one GPU's energy on two pods' series (copies), one of them seen to reset
    q = _queries()
    base = {"UUID": "GPU-D", "Hostname": "gpu-b", "gpu": "0"}
    a, b = {**base, "pod": "a", "namespace": "ml"}, {**base, "pod": "b", "namespace": "ml"}
    answers = {
        q.counter_window(promql.DCGM_ENERGY): _window(a, last=5e5, anchor=9e8, minimum=1e5, resets=1.0)
        + _window(b, last=5e5, anchor=9e8, minimum=1e5),
        q.raw_samples(promql.DCGM_ENERGY, "UUID", ["GPU-D"]): [
            {"metric": a, "values": [[T0 + 900, "9.5e8"], [T0 + 1800, "1e5"], [T0 + 3600, "5e5"]]},
            {"metric": b, "values": [[T0 + 900, "9.5e8"], [T0 + 1800, "1e5"], [T0 + 3600, "5e5"]]},
        ],
    }
    reader = TableReader(answers)
    data = hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    assert all(sw.window.resets >= 1 and sw.window.raw is not None for sw in data.dcgm_energy)
    assert sum(1 for query in reader.asked if "=~" in query and "GPU-D" in query) == 1
    (gpu,) = hour_compute(data).gpu_hours
    assert gpu.device_energy_j == pytest.approx((9.5e8 - 9e8 + 5e5) / 1000.0)  # one GPU's, across its reset


def test_dcgms_settings_are_asked_only_for_a_gpu_the_agent_gave_none_for() -> None:
    q = _queries()
    answers = _agent_answers(q, reset=False)
    reader = TableReader(answers)
    hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    assert q.dcgm_settings() not in reader.asked
    answers[q.job_gauges()] = answers[q.job_gauges()][:1]  # an older agent: its power limit, no clock
    reader = TableReader(answers)
    hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    assert q.dcgm_settings() in reader.asked


def test_a_gpu_dcgm_shows_without_an_energy_meter_is_asked_what_is_known_of_it() -> None:
    q = _queries()
    answers = _agent_answers(q, reset=False)
    present = [
        {"metric": {"UUID": "GPU-V", "Hostname": "vm-1", promql.TAG: "present"}, "value": [AT, "240"]},
        {"metric": {"UUID": "GPU-1", "Hostname": "gpu-a", promql.TAG: "present"}, "value": [AT, "240"]},  # metered
    ]
    answers[q.dcgm_series()] = present
    answers[q.unmetered_signals(["GPU-V"])] = [
        {"metric": {"UUID": "GPU-V", promql.TAG: "util"}, "value": [AT, "42"]},
    ]
    reader = TableReader(answers)
    data = hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    assert q.unmetered_signals(["GPU-V"]) in reader.asked  # that GPU alone: the agent meters GPU-1
    assert data.unmetered_signals == [("util", {"UUID": "GPU-V"}, 42.0)]


def test_foreign_names_are_asked_only_when_nothing_read_answered_and_not_by_a_named_shard() -> None:
    q = _queries()
    reader = TableReader({q.foreign_names(): [{"metric": {"__name__": "dcgm_power_usage"}, "value": [AT, "3"]}]})
    data = hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    assert data.foreign_names == ["dcgm_power_usage"]
    shard = _queries(node_match='=~"gpu-a.*"')
    reader = TableReader({})
    assert hour_fetch(reader=reader, queries=shard, hour_start=T0).foreign_names == []  # type: ignore[arg-type]
    assert shard.foreign_names() not in reader.asked
    rest = _queries(node_match='!~"gpu-a.*"')
    reader = TableReader({})
    hour_fetch(reader=reader, queries=rest, hour_start=T0)  # type: ignore[arg-type]
    assert rest.foreign_names() in reader.asked


def test_the_work_counters_are_asked_of_a_whole_cluster_or_its_rest_shard_and_their_resets_raw() -> None:
    vllm = WorkCounters("vllm", output_tokens="vllm:generation_tokens_total", model_label="model_name")
    q = _queries(work=(vllm,))
    serve = {"pod": "serve-0", "namespace": "ml", promql.WORK_TAG: "vllm/output_tokens", promql.MODEL_TAG: "llama"}
    raw = q.work_raw_samples("vllm:generation_tokens_total", "pod", ["serve-0"])
    answers = {
        q.work_counters(): _window(serve, last=50.0, anchor=900.0, minimum=10.0, resets=1.0),
        raw: [{"metric": {"pod": "serve-0", "namespace": "ml"},
               "values": [[T0 + 60, "1000"], [T0 + 120, "10"], [T0 + 3600, "50"]]}],
    }  # fmt: skip
    reader = TableReader(answers)
    data = hour_fetch(reader=reader, queries=q, hour_start=T0)  # type: ignore[arg-type]
    (work,) = data.work
    assert reader.asked.count(raw) == 1 and work.window.raw == [(T0 + 60, 1000.0), (T0 + 120, 10.0), (T0 + 3600, 50.0)]
    named_shard = _queries(work=(vllm,), node_match='=~"gpu-a.*"')
    reader = TableReader({})
    assert hour_fetch(reader=reader, queries=named_shard, hour_start=T0).work == []  # type: ignore[arg-type]
    assert named_shard.work_counters() not in reader.asked


def test_the_pods_claims_are_asked_only_where_kube_state_metrics_is() -> None:
    q = _queries(pod_claims=True)
    answers = {
        q.pod_gpu_claims(): [
            {"metric": {"namespace": "ml", "pod": "a", promql.TAG: "known"}, "value": [AT, "1"]},
            {"metric": {"namespace": "ml", "pod": "a", promql.TAG: "gpus"}, "value": [AT, "2"]},
        ]
    }
    data = hour_fetch(reader=TableReader(answers), queries=q, hour_start=T0)  # type: ignore[arg-type]
    assert data.pod_claims is not None and data.pod_claims.gpus == {("ml", "a"): 2.0}
    reader = TableReader({})
    assert hour_fetch(reader=reader, queries=_queries(), hour_start=T0).pod_claims is None  # type: ignore[arg-type]
    assert _queries(pod_claims=True).pod_gpu_claims() not in reader.asked
