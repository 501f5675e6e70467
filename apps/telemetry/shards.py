"""A big cluster's node groups, and one hour's answers put back together (pure).

A cluster is split by node name: each shard's queries carry its node matcher, so no query loads more than one
group's series, and the number of queries per shard-hour stays the same whatever the fleet's size. The nodes
no shard names form the `rest` shard (`!~` every pattern), so the shards always cover the cluster. Each shard's
answers are parsed on their own; the hour is computed once from their union, which is what one query over the
whole cluster would have returned (the queries aggregate per series, never across series) — provided no node
is in two shards, which `hour_inputs_merge` checks.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from .counters import CounterWindow
from .hour import HourInput, SeriesWindow

WHOLE = "all"  # the one "shard" of a cluster that is not split
REST = "rest"  # the nodes no pattern names
RESERVED = (WHOLE, REST)  # names no configured shard may take
# What Python's `re` takes and Prometheus's RE2 does not: look-around and back-references.
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]")


def node_pattern_problem(pattern: str) -> str | None:
    """Why Prometheus could not run `pattern` as a node matcher (`=~`, RE2), or None when it can."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a regular expression: {exc}"
    if _NOT_RE2.search(pattern):
        return "Prometheus's regular expressions (RE2) have no look-around or back-reference"
    return None


class ShardOverlapError(ValueError):
    """A node's series came back in two shards: their patterns overlap; the hour would count it twice."""


@dataclass(frozen=True)
class Shard:
    name: str
    node_match: str  # for HourQueries.node_match: `=~"..."`, `!~"..."`, or "" for the whole cluster


def _quoted(pattern: str) -> str:
    return '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cluster_shards(patterns: list[tuple[str, str]]) -> list[Shard]:
    """[(name, node regex)] -> the shards to fetch: each named one, then `rest`. None named: the whole cluster."""
    if not patterns:
        return [Shard(WHOLE, "")]
    named = [Shard(name, "=~" + _quoted(pattern)) for name, pattern in sorted(patterns)]
    rest = "!~" + _quoted("|".join(f"(?:{pattern})" for _, pattern in sorted(patterns)))
    return [*named, Shard(REST, rest)]


# --- Staging a shard's answers in Postgres until its hour's other shards are in --------------------------
#
# Columns, not one object per series: each metric's label sets, then its windows' values as arrays, written and
# read by orjson. A window's floats are any floats Prometheus answered, NaN and infinities included, which JSON
# has no words for: a document holding one is written by the standard library (NaN, Infinity), which orjson
# refuses to read, and read back by it. The first form (one object per series, `hour_input_json`) is still read.

_WINDOW_COLUMNS = ("last", "anchor", "minimum", "resets")


def _window_json(w: CounterWindow) -> dict[str, Any]:
    return {"last": w.last, "anchor": w.anchor, "minimum": w.minimum, "resets": w.resets, "raw": w.raw}


def _window(d: dict[str, Any]) -> CounterWindow:
    raw = d.get("raw")
    return CounterWindow(
        last=d["last"],
        anchor=d["anchor"],
        minimum=d["minimum"],
        resets=d["resets"],
        raw=[(float(t), float(v)) for t, v in raw] if raw is not None else None,
    )


def _series_json(windows: list[SeriesWindow]) -> list[dict[str, Any]]:
    return [{"labels": sw.labels, "window": _window_json(sw.window)} for sw in windows]


def _series(items: list[dict[str, Any]]) -> list[SeriesWindow]:
    return [SeriesWindow(labels=dict(i["labels"]), window=_window(i["window"])) for i in items]


def hour_input_json(data: HourInput) -> dict[str, Any]:
    """The parsed answers as JSON, one object per series (the first staging form; still read)."""
    return {
        "hour_start": data.hour_start,
        "scrape_interval_s": data.scrape_interval_s,
        "counters": {metric: _series_json(ws) for metric, ws in data.counters.items()},
        "dcgm_energy": _series_json(data.dcgm_energy),
        "job_gauges": [list(t) for t in data.job_gauges],
        "job_info": data.job_info,
        "agent_info": data.agent_info,
        "dcgm_series": [list(t) for t in data.dcgm_series],
    }


def hour_input_from_json(d: dict[str, Any]) -> HourInput:
    return HourInput(
        hour_start=float(d["hour_start"]),
        scrape_interval_s=int(d["scrape_interval_s"]),
        counters={metric: _series(items) for metric, items in d["counters"].items()},
        dcgm_energy=_series(d["dcgm_energy"]),
        job_gauges=[(str(tag), dict(labels), float(v)) for tag, labels, v in d["job_gauges"]],
        job_info=[dict(x) for x in d["job_info"]],
        agent_info=[dict(x) for x in d["agent_info"]],
        dcgm_series=[(str(tag), dict(labels), float(v)) for tag, labels, v in d["dcgm_series"]],
    )


def _columns(windows: list[SeriesWindow]) -> dict[str, Any]:
    out: dict[str, Any] = {"labels": [sw.labels for sw in windows]}
    for name in _WINDOW_COLUMNS:
        out[name] = [getattr(sw.window, name) for sw in windows]
    out["raw"] = [[i, sw.window.raw] for i, sw in enumerate(windows) if sw.window.raw is not None]
    return out


def _from_columns(cols: dict[str, Any]) -> list[SeriesWindow]:
    windows = [
        SeriesWindow(labels=labels, window=CounterWindow(last=last, anchor=anchor, minimum=minimum, resets=resets))
        for labels, last, anchor, minimum, resets in zip(
            cols["labels"], cols["last"], cols["anchor"], cols["minimum"], cols["resets"], strict=True
        )
    ]
    for i, raw in cols["raw"]:
        windows[i].window.raw = [(float(t), float(v)) for t, v in raw]
    return windows


def _finite(values: Iterable[float | None]) -> bool:
    return all(v is None or math.isfinite(v) for v in values)


def _all_finite(data: HourInput) -> bool:
    windows = [w for ws in data.counters.values() for w in ws] + data.dcgm_energy + data.work
    return (
        all(_finite(getattr(sw.window, name) for sw in windows) for name in _WINDOW_COLUMNS)
        and all(_finite(v for _, v in sw.window.raw) for sw in windows if sw.window.raw is not None)
        and _finite(v for _, _, v in data.job_gauges)
        and _finite(v for _, _, v in data.dcgm_series)
    )


def staged_bytes(data: HourInput, meta: dict[str, Any]) -> bytes:
    """A shard's answers and what fetching them took, as they wait in Postgres for the hour's other shards."""
    document = {
        "form": 2,
        "hour_start": data.hour_start,
        "scrape_interval_s": data.scrape_interval_s,
        "counters": {metric: _columns(ws) for metric, ws in data.counters.items()},
        "dcgm_energy": _columns(data.dcgm_energy),
        "job_gauges": data.job_gauges,
        "job_info": data.job_info,
        "agent_info": data.agent_info,
        "dcgm_series": data.dcgm_series,
        "foreign_names": data.foreign_names,
        "work": _columns(data.work),
        "_meta": meta,
    }
    text = orjson.dumps(document) if _all_finite(data) else json.dumps(document, separators=(",", ":")).encode()
    return zlib.compress(text, level=1)


def staged_read(blob: bytes) -> tuple[HourInput, dict[str, Any]]:
    text = zlib.decompress(blob)
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN or an infinity in it: written by the standard library
        document = json.loads(text)
    if document.get("form") != 2:
        return hour_input_from_json(document), document["_meta"]
    data = HourInput(
        hour_start=float(document["hour_start"]),
        scrape_interval_s=int(document["scrape_interval_s"]),
        counters={metric: _from_columns(cols) for metric, cols in document["counters"].items()},
        dcgm_energy=_from_columns(document["dcgm_energy"]),
        job_gauges=[(tag, labels, float(v)) for tag, labels, v in document["job_gauges"]],
        job_info=document["job_info"],
        agent_info=document["agent_info"],
        dcgm_series=[(tag, labels, float(v)) for tag, labels, v in document["dcgm_series"]],
        foreign_names=list(document.get("foreign_names", [])),  # absent from a document staged before it
        work=_from_columns(document["work"]) if "work" in document else [],
    )
    return data, document["_meta"]


def _nodes(data: HourInput) -> set[str]:
    """The node names a shard's answers carry (the agent's `hostname`, dcgm-exporter's `Hostname`)."""
    labels: list[dict[str, str]] = [sw.labels for ws in data.counters.values() for sw in ws]
    labels += [sw.labels for sw in data.dcgm_energy]
    labels += [lb for _, lb, _ in data.job_gauges] + data.job_info + data.agent_info
    labels += [lb for _, lb, _ in data.dcgm_series]
    return {lb.get("hostname") or lb.get("Hostname") or "" for lb in labels} - {""}


def hour_inputs_merge(parts: dict[str, HourInput]) -> HourInput:
    """One hour's shards as one answer (in shard order, so a re-run merges the same way). A node in two
    shards is refused: ShardOverlapError names it and the shards."""
    if not parts:
        raise ValueError("No shard to merge.")
    seen: dict[str, str] = {}
    for name in sorted(parts):
        for node in _nodes(parts[name]):
            if node in seen:
                raise ShardOverlapError(f"node {node} is in shards {seen[node]} and {name}: their patterns overlap")
            seen[node] = name
    first = parts[sorted(parts)[0]]
    merged = HourInput(hour_start=first.hour_start, scrape_interval_s=first.scrape_interval_s)
    for name in sorted(parts):
        data = parts[name]
        for metric, windows in data.counters.items():
            merged.counters.setdefault(metric, []).extend(windows)
        merged.dcgm_energy += data.dcgm_energy
        merged.job_gauges += data.job_gauges
        merged.job_info += data.job_info
        merged.agent_info += data.agent_info
        merged.dcgm_series += data.dcgm_series
        merged.work += data.work
        merged.foreign_names = sorted(set(merged.foreign_names) | set(data.foreign_names))
    return merged
