"""Running one cluster-hour's queries and parsing the answers into an HourInput."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import promql
from .counters import CounterWindow
from .hour import HourInput, PodClaims, SeriesWindow, dcgm_uuid
from .prometheus import PrometheusReader

_DROP = {"__name__", promql.TAG}
PARALLEL_QUERIES = 4


def _series_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted([kv for kv in labels.items() if kv[0] not in _DROP]))


def _series_key_taken(labels: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The tag and the series' key, taking both off `labels` (a freshly decoded answer's, used once): cheaper
    than _series_key, and it runs for every item of every answer (~30,000 an hour at 1,000 GPUs)."""
    tag = labels.pop(promql.TAG, "")
    labels.pop("__name__", None)
    return tag, tuple(sorted(labels.items()))


def parse_counter_windows(result: list[dict[str, Any]]) -> list[SeriesWindow]:
    windows: dict[tuple[tuple[str, str], ...], SeriesWindow] = {}
    for item in result:
        tag, key = _series_key_taken(item["metric"])
        sw = windows.get(key)
        if sw is None:
            sw = windows[key] = SeriesWindow(labels=dict(key), window=CounterWindow())
        value = float(item["value"][1])
        match tag:
            case "last":
                sw.window.last = value
            case "anchor":
                sw.window.anchor = value
            case "min":
                sw.window.minimum = value
            case "resets":
                sw.window.resets = value
    return list(windows.values())


def parse_tagged(result: list[dict[str, Any]]) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for item in result:
        tag, key = _series_key_taken(item["metric"])
        out.append((tag, dict(key), float(item["value"][1])))
    return out


def _attach_raw(
    reader: PrometheusReader,
    queries: promql.HourQueries,
    metric: str,
    windows: list[SeriesWindow],
    *,
    label_names: tuple[str, ...],
    at: float,
) -> None:
    """Fetch the raw samples of the series that reset, in at most one query per label name."""
    by_label: dict[str, set[str]] = defaultdict(set)
    for sw in windows:
        if sw.window.needs_raw_samples():
            for name in label_names:
                if sw.labels.get(name):
                    by_label[name].add(sw.labels[name])
                    break
    if not by_label:
        return
    index = {_series_key(sw.labels): sw for sw in windows}
    for name, values in by_label.items():
        for item in reader.instant(queries.raw_samples(metric, name, sorted(values)), at=at):
            reset = index.get(_series_key(item["metric"]))
            if reset is not None:
                reset.window.raw = [(float(t), float(v)) for t, v in item["values"]]


# The labels a work series' raw samples are asked by: the pod's, else the scrape target's.
_WORK_RAW_LABELS = ("pod", "exported_pod", "hpc_job", "job_key", "instance")


def _attach_work_raw(
    reader: PrometheusReader, queries: promql.HourQueries, windows: list[SeriesWindow], *, at: float
) -> None:
    """The raw samples of the work series that reset (an engine restarted in its pod), in at most one query per
    counter and label name."""
    wanted: dict[tuple[str, str], set[str]] = defaultdict(set)
    for sw in windows:
        if sw.window.needs_raw_samples():
            metric = queries.work_metric(sw.labels.get(promql.WORK_TAG, ""))
            name = next((n for n in _WORK_RAW_LABELS if sw.labels.get(n)), "")
            if metric and name:
                wanted[(metric, name)].add(sw.labels[name])
    if not wanted:
        return
    drop = {promql.WORK_TAG, promql.MODEL_TAG}
    index: dict[tuple[str, tuple[tuple[str, str], ...]], SeriesWindow] = {}
    for sw in windows:
        key = tuple(sorted((k, v) for k, v in sw.labels.items() if k not in drop))
        index[(queries.work_metric(sw.labels.get(promql.WORK_TAG, "")), key)] = sw
    for (metric, name), values in wanted.items():
        for item in reader.instant(queries.work_raw_samples(metric, name, sorted(values)), at=at):
            found = index.get((metric, _series_key(item["metric"])))
            if found is not None:
                found.window.raw = [(float(t), float(v)) for t, v in item["values"]]


def _settings_missing(data: HourInput) -> bool:
    """Whether some GPU of the hour has no power limit or SM clock from the agent (an older agent, a GPU that does
    not support them, a GPU only dcgm-exporter reports)."""
    told: dict[str, set[str]] = defaultdict(set)
    for tag, labels, _ in data.job_gauges:
        if tag in ("power_limit", "sm_clock") and labels.get("uuid"):
            told[labels["uuid"]].add(tag)
    covered = {uuid for uuid, tags in told.items() if len(tags) == 2}
    gpus = {sw.labels.get("uuid", "") for sw in data.counters.get(promql.GPU_ENERGY, []) if sw.window.last is not None}
    gpus |= {dcgm_uuid(sw.labels) for sw in data.dcgm_energy if sw.window.last is not None}
    gpus |= {dcgm_uuid(labels) for tag, labels, _ in data.dcgm_series if tag == "present"}
    return bool(gpus - covered - {""})


def _info_labels(result: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [dict(_series_key(item["metric"])) for item in result]


def hour_fetch(*, reader: PrometheusReader, queries: promql.HourQueries, hour_start: float) -> HourInput:
    """The hour's queries, a few at a time (Prometheus answers them in parallel), each answer parsed in the
    thread that waited for it (while the others are still evaluated), then the raw samples of any series
    that reset."""
    at = hour_start + 3600.0
    data = HourInput(hour_start=hour_start, scrape_interval_s=queries.scrape_interval_s)
    batch: dict[str, tuple[str, Callable[[list[dict[str, Any]]], Any]]] = {
        metric: (queries.counter_window(metric), parse_counter_windows)
        for metric in (*promql.AGENT_COUNTERS, promql.DCGM_ENERGY)
    }
    batch |= {
        "gauges": (queries.job_gauges(), parse_tagged),
        "info": (queries.job_info(), _info_labels),
        "dcgm": (queries.dcgm_series(), parse_tagged),
    }
    # Work series name no GPU node: asked of a whole cluster, or of a sharded one's `rest` shard alone.
    if queries.work and not queries.node_match.startswith("=~"):
        batch["work"] = (queries.work_counters(), parse_counter_windows)
    if queries.pod_claims:
        batch["claims"] = (queries.pod_gpu_claims(), lambda result: PodClaims.from_answer(parse_tagged(result)))

    def answer(name: str) -> Any:
        query, parse = batch[name]
        return parse(reader.instant(query, at=at))

    with ThreadPoolExecutor(max_workers=PARALLEL_QUERIES) as pool:
        answers = dict(zip(batch, pool.map(answer, batch), strict=True))
    for metric in promql.AGENT_COUNTERS:
        windows = answers[metric]
        _attach_raw(reader, queries, metric, windows, label_names=("hostname",), at=at)
        data.counters[metric] = windows
    data.dcgm_energy = answers[promql.DCGM_ENERGY]
    # dcgm copies of one GPU are merged later, so every copy of a GPU that reset needs its samples.
    reset_uuids = {dcgm_uuid(sw.labels) for sw in data.dcgm_energy if sw.window.needs_raw_samples()}
    for sw in data.dcgm_energy:
        if dcgm_uuid(sw.labels) in reset_uuids and sw.window.last is not None:
            sw.window.resets = max(sw.window.resets, 1.0)
    _attach_raw(reader, queries, promql.DCGM_ENERGY, data.dcgm_energy, label_names=("UUID", "uuid"), at=at)
    data.job_gauges = answers["gauges"]
    infos = answers["info"]
    data.job_info = [labels for labels in infos if "job_key" in labels]
    data.agent_info = [labels for labels in infos if "job_key" not in labels]
    data.dcgm_series = answers["dcgm"]
    data.pod_claims = answers.get("claims")
    if _settings_missing(data):  # dcgm-exporter's word, for the GPUs the agent gave none for (the answers say which)
        data.dcgm_series += parse_tagged(reader.instant(queries.dcgm_settings(), at=at))
    data.work = answers.get("work", [])
    _attach_work_raw(reader, queries, data.work, at=at)
    # GPUs dcgm-exporter shows with no energy meter: what is known of them (utilisation, memory, who held them).
    metered = {dcgm_uuid(sw.labels) for sw in data.dcgm_energy if sw.window.last is not None}
    metered |= {sw.labels.get("uuid", "") for sw in data.counters.get(promql.GPU_ENERGY, [])}
    unmetered = sorted({dcgm_uuid(labels) for tag, labels, _ in data.dcgm_series if tag == "present"} - metered - {""})
    if unmetered:
        data.unmetered_signals = parse_tagged(reader.instant(queries.unmetered_signals(unmetered), at=at))
    unread = not data.dcgm_series and not any(sw.window.last is not None for ws in data.counters.values() for sw in ws)
    # Nothing fleetwatt reads: ask what is there instead, so that an unknown exporter is named, not a zero. Of a
    # sharded cluster only the `rest` shard asks (the question has no node matcher): a named shard may be empty.
    if unread and not queries.node_match.startswith("=~"):
        found = reader.instant(queries.foreign_names(), at=at)
        data.foreign_names = sorted({item["metric"].get("__name__", "") for item in found} - {""})
    return data
