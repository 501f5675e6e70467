"""apps.telemetry.work: each hour's work per job from the engines' counter windows (pure), and the query that
asks for them."""

from __future__ import annotations

from apps.fleet.work_counters import DEFAULT_WORK_COUNTERS, WorkCounters
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import SeriesWindow
from apps.telemetry.promql import HourQueries
from apps.telemetry.work import UnjoinedWork, WorkRow, work_job_key, work_rows

T0 = 1_793_577_600.0  # 2026-11-02T00:00:00Z
POD = {"namespace": "search", "pod": "llama-0", "container": "vllm", "instance": "10.0.0.7:8000", "job": "vllm"}


def _series(kind: str, window: CounterWindow, *, model: str = "llama", engine: str = "vllm", **labels: str):
    return SeriesWindow(labels={**POD, **labels, "fw_w": f"{engine}/{kind}", "fw_model": model}, window=window)


def test_the_job_key_of_a_work_series() -> None:
    assert work_job_key({"namespace": "ns", "pod": "p"}) == "k8s/ns/p"
    # a scrape without honorLabels: the pod's own labels are exported_*, the target's are the scraper's
    labels = {"namespace": "monitoring", "pod": "prom-0", "exported_namespace": "ns", "exported_pod": "p"}
    assert work_job_key(labels) == "k8s/ns/p"
    assert work_job_key({"hpc_job": "42"}) == "slurm/42"
    assert work_job_key({"job_key": "slurm/7", "pod": "p"}) == "slurm/7"  # a counter that names its job itself
    assert work_job_key({"instance": "10.0.0.7:8000"}) == ""


def test_an_hour_of_a_server_adds_its_kinds_into_one_row() -> None:
    # given a server running before the hour, and a finished_reason that first appears within it
    series = [
        _series("output_tokens", CounterWindow(last=9_000.0, anchor=1_000.0, minimum=1_200.0)),
        _series("prompt_tokens", CounterWindow(last=30_000.0, anchor=3_000.0, minimum=3_500.0)),
        _series("requests", CounterWindow(last=30.0, anchor=4.0, minimum=5.0), finished_reason="stop"),
        _series("requests", CounterWindow(last=2.0, minimum=1.0), finished_reason="length"),
    ]
    # when
    rows, unjoined = work_rows(series, hour_start=T0)
    # then
    assert rows == [
        WorkRow("k8s/search/llama-0", "vllm", "llama", "", output_tokens=8_000, prompt_tokens=27_000, requests=28)
    ]
    assert unjoined == []


def test_a_restart_counts_from_zero_and_a_second_scrape_job_counts_once() -> None:
    raw = [(T0 + 600, 500.0), (T0 + 1200, 900.0), (T0 + 1800, 100.0), (T0 + 3600, 400.0)]  # restart after 1200 s
    restarted = CounterWindow(last=400.0, anchor=200.0, minimum=100.0, resets=1.0, raw=raw)
    twice = {"job": "vllm-copy", "instance": "10.0.0.7:8001"}
    series = [_series("output_tokens", restarted), _series("output_tokens", restarted, **twice)]
    (row,), _ = work_rows(series, hour_start=T0)
    assert row.output_tokens == (900 - 200) + 400


def test_models_engines_and_units_are_rows_of_their_own_and_silence_is_no_row() -> None:
    series = [
        _series("output_tokens", CounterWindow(last=10.0, anchor=0.0), model="a"),
        _series("output_tokens", CounterWindow(last=20.0, anchor=0.0), model="b"),
        _series("output_tokens", CounterWindow(last=5.0, anchor=5.0), model="idle"),  # nothing served: no row
        _series("units", CounterWindow(last=7.0, anchor=1.0), model="", engine="fleetwatt", unit="step"),
        _series("units", CounterWindow(last=3.0), model="", engine="fleetwatt"),  # no unit label
    ]
    rows, _ = work_rows(series, hour_start=T0)
    assert [(r.engine, r.model, r.unit, r.output_tokens, r.units) for r in rows] == [
        ("fleetwatt", "", "step", 0, 6),
        ("fleetwatt", "", "unit", 0, 3),
        ("vllm", "a", "", 10, 0),
        ("vllm", "b", "", 20, 0),
    ]


def test_work_no_label_ties_to_a_job_is_named_not_stored() -> None:
    lost = SeriesWindow(
        labels={"instance": "10.0.0.9:8000", "job": "tgi", "fw_w": "tgi/output_tokens"},
        window=CounterWindow(last=50.0, anchor=10.0),
    )
    rows, unjoined = work_rows([lost], hour_start=T0)
    assert rows == [] and unjoined == [UnjoinedWork("tgi", "", 'instance="10.0.0.9:8000",job="tgi"', output_tokens=40)]


def test_one_query_carries_every_engine_s_counters_with_their_model() -> None:
    queries = HourQueries(
        cluster_selector='cluster="a"', scrape_interval_s=15, lookback_s=600, work=DEFAULT_WORK_COUNTERS
    )
    text = queries.work_counters()
    assert (
        'vllm:generation_tokens_total{cluster="a"}' in text and 'tgi_request_generated_tokens_sum{cluster="a"}' in text
    )
    assert '"fw_w", "vllm/output_tokens"' in text and '"fw_model", "$1", "model_name", "(.*)"' in text
    assert '"fw_model", "$1", "model", "(.*)"' in text  # Triton's model label
    assert queries.work_metric("triton/requests") == "nv_inference_request_success"
    assert queries.work_metric("vllm/units") == ""
    none = HourQueries(cluster_selector="", scrape_interval_s=15, lookback_s=600, work=(WorkCounters("x", units="u"),))
    assert none.work_counters().count("last_over_time") == 2  # last and anchor of its one counter
