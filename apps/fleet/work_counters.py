"""Which work counters the ingest reads on a cluster (pure): the serving engines' token and request counters, and
a job's own work counter (apps.telemetry.work reads them). A cluster's `work_counters` in the fleet config
(docs/config.md) replaces the defaults below; stored on the cluster as JSON (Cluster.work_counters), null meaning
the defaults."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

OUTPUT_TOKENS, PROMPT_TOKENS, REQUESTS, UNITS = "output_tokens", "prompt_tokens", "requests", "units"
KINDS = (OUTPUT_TOKENS, PROMPT_TOKENS, REQUESTS, UNITS)

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")
_ENGINE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,29}\Z")


@dataclass(frozen=True)
class WorkCounters:
    """One engine's counters: the name of each (empty: the engine has none) and the label naming the model served
    (empty: the engine names none, as TGI: one model a server)."""

    engine: str
    output_tokens: str = ""
    prompt_tokens: str = ""
    requests: str = ""
    units: str = ""  # a job's own work counter, labelled `unit` (steps, samples, images)
    model_label: str = ""

    def metrics(self) -> dict[str, str]:
        """kind -> counter name, for the counters the engine has."""
        return {kind: name for kind in KINDS if (name := getattr(self, kind))}


DEFAULT_WORK_COUNTERS: tuple[WorkCounters, ...] = (
    # vLLM's production metrics (docs.vllm.ai, "Production Metrics"); request_success is per finished_reason.
    WorkCounters(
        "vllm",
        output_tokens="vllm:generation_tokens_total",
        prompt_tokens="vllm:prompt_tokens_total",
        requests="vllm:request_success_total",
        model_label="model_name",
    ),
    # TGI's (its docs, "Metrics"): tokens per request are histograms; their _sum series are counters.
    WorkCounters(
        "tgi",
        output_tokens="tgi_request_generated_tokens_sum",
        prompt_tokens="tgi_request_input_length_sum",
        requests="tgi_request_success",
    ),
    # SGLang's (its docs, "Production Metrics"; with --enable-metrics).
    WorkCounters(
        "sglang",
        output_tokens="sglang:generation_tokens_total",
        prompt_tokens="sglang:prompt_tokens_total",
        requests="sglang:num_requests_total",
        model_label="model_name",
    ),
    # Triton's: requests per model, and its TensorRT-LLM backend's token-length histograms per model.
    WorkCounters(
        "triton",
        output_tokens="nv_llm_output_token_len_sum",
        prompt_tokens="nv_llm_input_token_len_sum",
        requests="nv_inference_request_success",
        model_label="model",
    ),
    WorkCounters("fleetwatt", units="fleetwatt_job_work_units_total"),
)


def work_counters_parse(value: Any, path: str) -> tuple[tuple[WorkCounters, ...] | None, list[str]]:
    """A cluster's `work_counters`: a list of engines, each `{engine, output_tokens, prompt_tokens, requests, units,
    model_label}` (one counter at least). None (the key given as null) means the defaults; [] reads none. Returns
    the engines and every problem as `path: what is wrong`."""
    if value is None:
        return None, []
    if not isinstance(value, list):
        return None, [f"{path}: a list of engines ({{engine, output_tokens, ...}}), or null for the defaults"]
    problems: list[str] = []
    out: list[WorkCounters] = []
    allowed = {f.name for f in fields(WorkCounters)}
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: a mapping such as {{engine: vllm, output_tokens: ...}}")
            continue
        before = len(problems)
        problems += [
            f"{where}.{k}: not a key of an engine ({', '.join(sorted(allowed))})" for k in item if k not in allowed
        ]
        engine = item.get("engine")
        if not isinstance(engine, str) or not _ENGINE_NAME.match(engine):
            problems.append(f"{where}.engine: a short name in lower case (a-z, 0-9, _ or -), e.g. vllm")
        elif engine in {e.engine for e in out}:
            problems.append(f"{where}.engine: {engine!r} is named twice")
        for kind in (*KINDS, "model_label"):
            name = item.get(kind, "")
            pattern = _LABEL_NAME if kind == "model_label" else _METRIC_NAME
            if not isinstance(name, str) or (name and not pattern.match(name)):
                what = "a label name" if kind == "model_label" else "a Prometheus metric name"
                problems.append(f"{where}.{kind}: {what}, got {name!r}")
        if len(problems) == before and not any(item.get(kind) for kind in KINDS):
            problems.append(f"{where}: name one counter at least ({', '.join(KINDS)})")
        if len(problems) == before:
            out.append(WorkCounters(**{k: str(v) for k, v in item.items()}))
    return (tuple(out) if not problems else None), problems


def work_counters_json(counters: Sequence[WorkCounters]) -> list[dict[str, str]]:
    """As stored on the cluster (Cluster.work_counters): only the keys given."""
    return [{k: v for k, v in asdict(c).items() if v} for c in counters]


def work_counters_from_json(value: Any) -> tuple[WorkCounters, ...]:
    """A cluster's stored `work_counters`: None is the defaults. A stored value is checked when it is written."""
    if value is None:
        return DEFAULT_WORK_COUNTERS
    counters, problems = work_counters_parse(value, "work_counters")
    if problems or counters is None:
        raise ValueError("; ".join(problems))
    return counters
