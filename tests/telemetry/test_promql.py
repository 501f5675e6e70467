"""apps.telemetry.promql (pure): the fixed handful of queries of a cluster-hour. Every query is well formed (brackets
balanced and strings closed outside and inside its label matchers), carries the cluster's matchers on every selector,
and a shard's node matcher on its own label (the agent's `hostname`, dcgm-exporter's `Hostname` or the cluster's
label); a range covers [t - d, t] on either engine; the values a raw-samples or unmetered query names are escaped so
that, read back as PromQL reads a string, the regex matches exactly those values. The queries against a real
Prometheus and VictoriaMetrics: the ingest's end-to-end tests (tests/telemetry/test_ingest_end_to_end.py,
test_engines.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.fleet.work_counters import WorkCounters
from apps.telemetry import promql
from apps.telemetry.promql import HourQueries, selector

CLUSTER = '{cluster="east",env="prod"}'


def _queries(**fields: object) -> HourQueries:
    return HourQueries(cluster_selector=CLUSTER, scrape_interval_s=15, lookback_s=600, **fields)  # type: ignore[arg-type]


def _all_queries(q: HourQueries) -> list[str]:
    return [
        *(q.counter_window(m) for m in (*promql.AGENT_COUNTERS, promql.DCGM_ENERGY)),
        q.job_gauges(), q.job_info(), q.dcgm_series(), q.dcgm_settings(), q.pod_gpu_claims(), q.foreign_names(),
        q.unmetered_signals(["GPU-1", "GPU-2"]), q.raw_samples(promql.GPU_ENERGY, "hostname", ["gpu-a"]),
        *([q.work_counters()] if q.work else []),
    ]  # fmt: skip


def _strings_and_code(query: str) -> tuple[list[str], str]:
    """The query's string literals (their text as PromQL reads it) and the query with them taken out. A string that
    is not closed, or holds an escape Go's strings do not have, fails the test."""
    strings, code, i = [], [], 0
    while i < len(query):
        if query[i] != '"':
            code.append(query[i])
            i += 1
            continue
        i += 1
        text = []
        while True:
            assert i < len(query), f"a string is not closed in {query}"
            char = query[i]
            if char == '"':
                i += 1
                break
            if char == "\\":
                escaped = query[i + 1]
                assert escaped in '\\"', f"unknown escape \\{escaped} in {query}"
                text.append(escaped)
                i += 2
                continue
            text.append(char)
            i += 1
        strings.append("".join(text))
        code.append('""')
    return strings, "".join(code)


def _balanced(code: str) -> bool:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for char in code:
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
    return not stack


@pytest.mark.parametrize(
    "queries",
    [
        _queries(),
        _queries(windows_open_left=True),
        _queries(node_match='=~"gpu-a.*"', dcgm_host_label="node", pod_claims=True),
        _queries(node_match='!~"gpu-a.*|gpu-b.*"'),
        _queries(work=(WorkCounters("vllm", output_tokens="vllm:generation_tokens_total", model_label="model_name"),)),
    ],
)
def test_every_query_is_well_formed_and_scoped_to_the_cluster(queries: HourQueries) -> None:
    for query in _all_queries(queries):
        strings, code = _strings_and_code(query)
        assert _balanced(code), query
        # every selector of a metric carries the cluster's matchers
        selectors = re.findall(r"\{([^}]*)\}", code)
        assert selectors, query
        for matchers in selectors:
            assert 'cluster="",env=""' in matchers or matchers.startswith('cluster="",env=""'), (query, matchers)
        assert "east" in strings and "prod" in strings


def test_a_selector_joins_the_clusters_matchers_and_the_extra_ones() -> None:
    assert selector("m", CLUSTER) == 'm{cluster="east",env="prod"}'
    assert selector("m", "", 'uuid!=""') == 'm{uuid!=""}'
    assert selector("m", " {} ", "") == "m{}"
    assert selector("m", 'job="x"', 'pod!=""') == 'm{job="x",pod!=""}'


def test_a_counters_window_asks_its_four_aggregates_over_the_hour_and_the_anchor_before_it() -> None:
    query = _queries().counter_window(promql.GPU_ENERGY)
    m = f"{promql.GPU_ENERGY}{CLUSTER}"
    assert query == " or ".join(
        [
            f'label_replace(last_over_time({m}[1h]), "fw_q", "last", "", "")',
            f'label_replace(last_over_time({m}[600s] offset 1h), "fw_q", "anchor", "", "")',
            f'label_replace(min_over_time({m}[1h]), "fw_q", "min", "", "")',
            f'label_replace(resets({m}[1h]), "fw_q", "resets", "", "")',
        ]
    )


def test_on_an_engine_with_windows_open_on_the_left_a_range_is_a_millisecond_longer() -> None:
    closed, open_left = _queries(), _queries(windows_open_left=True)
    assert closed.window(600) == "600s" and closed.hour == "1h"
    assert open_left.window(600) == "600001ms" and open_left.hour == "3600001ms"
    assert "[1h]" not in " ".join(_all_queries(open_left))
    assert "[3600001ms]" in open_left.counter_window(promql.GPU_ENERGY)


def test_a_shards_node_matcher_goes_on_each_exporters_own_label() -> None:
    shard = _queries(node_match='=~"gpu-a.*"')
    assert f'{promql.GPU_ENERGY}{{cluster="east",env="prod",hostname=~"gpu-a.*"}}' in shard.counter_window(
        promql.GPU_ENERGY
    )
    assert f'{promql.DCGM_ENERGY}{{cluster="east",env="prod",Hostname=~"gpu-a.*"}}' in shard.counter_window(
        promql.DCGM_ENERGY
    )
    relabelled = _queries(node_match='!~"gpu-a.*"', dcgm_host_label="node")
    assert 'node!~"gpu-a.*"' in relabelled.dcgm_series() and "Hostname" not in relabelled.dcgm_series()
    # kube-state-metrics' and the work counters' series name no GPU node: never a node matcher
    assert "gpu-a" not in _queries(node_match='=~"gpu-a.*"', pod_claims=True).pod_gpu_claims()


def test_the_dcgm_series_ask_first_and_last_times_only_of_job_labelled_series() -> None:
    query = _queries().dcgm_series()
    strings, _ = _strings_and_code(query)
    assert {"power_sum", "present", "samples", "first", "last", "util", "fb_avg", "fb_max"} <= set(strings)
    for part in query.split(" or "):
        if "timestamp(" in part:
            assert any(f'{label}!=""' in part for label in promql.DCGM_JOB_LABELS), part
            assert "[1h:15s]" in part  # a subquery at the scrape step


def test_the_gauges_and_settings_are_tagged_as_the_parsers_read_them() -> None:
    gauges, _ = _strings_and_code(_queries().job_gauges())
    assert {"memory", "last_seen", "start", *promql.SETTINGS_TAGS} <= set(gauges)
    settings, _ = _strings_and_code(_queries().dcgm_settings())
    assert set(promql.SETTINGS_TAGS) <= set(settings)
    # the enforced limit where exported, else the management limit: the first a GPU has
    limit_avg = _queries().dcgm_settings().split(" or label_replace")[0]
    assert limit_avg.index(promql.DCGM_ENFORCED_POWER_LIMIT) < limit_avg.index(promql.DCGM_POWER_MGMT_LIMIT)


def test_the_work_query_labels_each_engines_counters_and_copies_its_model() -> None:
    vllm = WorkCounters("vllm", output_tokens="vllm:generation_tokens_total", requests="vllm:request_success_total",
                        model_label="model_name")  # fmt: skip
    own = WorkCounters("fleetwatt", units="fleetwatt_job_work_units_total")
    q = _queries(work=(vllm, own))
    strings, _ = _strings_and_code(q.work_counters())
    assert {"vllm/output_tokens", "vllm/requests", "fleetwatt/units", promql.WORK_TAG, promql.MODEL_TAG} <= set(strings)
    assert q.work_counters().count("vllm:generation_tokens_total") == 4  # last, anchor, min, resets
    assert q.work_counters().count('"model_name"') == 8  # each of vllm's two counters' four aggregates
    assert "model_name" not in q.work_counters().split("fleetwatt_job_work_units_total", 1)[1].split(" or ")[0]
    assert q.work_metric("vllm/requests") == "vllm:request_success_total"
    assert q.work_metric("fleetwatt/units") == "fleetwatt_job_work_units_total"
    assert q.work_metric("vllm/units") == "" and q.work_metric("tgi/requests") == "" and q.work_metric("") == ""
    assert _queries().work_counters() == ""  # no engine read: no query


VALUES = st.lists(
    st.text(alphabet=st.sampled_from('abcXYZ019-_.:/ ^$*+?()[]{}|\\"'), min_size=1, max_size=12),
    min_size=1,
    max_size=5,
)


def _matcher_regex(query: str, label: str) -> re.Pattern[str]:
    """The regex of the query's first matcher on `label`, as PromQL reads it (fully anchored: fullmatch)."""
    strings, code = _strings_and_code(query)
    return re.compile(strings[next(i for i, name in enumerate(_label_order(code)) if name == label)])


def _label_order(code: str) -> list[str]:
    """The label (or "") each string literal of the query belongs to, in order."""
    return [m.group(1) or "" for m in re.finditer(r'(?:([A-Za-z_]+)(?:=~|!~|!=|=))?""', code)]


@given(values=VALUES, other=st.text(min_size=1, max_size=12))
def test_the_values_a_raw_samples_query_names_are_matched_exactly(values: list[str], other: str) -> None:
    query = _queries().raw_samples(promql.GPU_ENERGY, "hostname", values)
    pattern = _matcher_regex(query, "hostname")
    assert all(pattern.fullmatch(v) for v in values)
    assert bool(pattern.fullmatch(other)) == (other in values)
    assert query.endswith("[1h]")


@given(uuids=VALUES)
def test_an_unmetered_gpus_query_matches_exactly_its_uuids_under_either_label(uuids: list[str]) -> None:
    query = _queries().unmetered_signals(uuids)
    strings, code = _strings_and_code(query)
    order = _label_order(code)
    for label in ("UUID", "uuid"):
        patterns = {strings[i] for i, name in enumerate(order) if name == label}
        assert len(patterns) == 1  # the same set of GPUs for every signal
        pattern = re.compile(patterns.pop())
        assert all(pattern.fullmatch(u) for u in uuids)
        assert not pattern.fullmatch("GPU-not-asked-" + uuids[0])


def test_a_work_series_raw_samples_are_asked_by_its_label_without_a_node_matcher() -> None:
    q = _queries(node_match='=~"gpu-a.*"')
    query = q.work_raw_samples("vllm:generation_tokens_total", "pod", ["serve-0", "serve-1"])
    assert query == 'vllm:generation_tokens_total{cluster="east",env="prod",pod=~"serve-0|serve-1"}[1h]'


def test_the_foreign_names_query_counts_gpu_metric_names_of_the_cluster() -> None:
    assert _queries().foreign_names() == (
        'count by (__name__) (last_over_time({cluster="east",env="prod",__name__=~"(?i)(dcgm|nvidia)_.+"}[1h]))'
    )
    assert re.fullmatch("(?i)(dcgm|nvidia)_.+", "dcgm_power_usage")


def test_the_agent_counters_and_methods_are_the_documented_ones() -> None:
    assert len(set(promql.AGENT_COUNTERS)) == len(promql.AGENT_COUNTERS) == 9
    assert promql.GPU_SAMPLED in promql.EXTENSIONS and promql.JOB_OCCUPANCY in promql.EXTENSIONS
    assert promql.EXTENSIONS[2] == promql.JOB_LAST_SEEN
    assert "whole_gpu" in promql.AGENT_METHODS and "estimated" not in promql.AGENT_METHODS
