"""What an inference server in the simulated fleet exports: vLLM's token and request counters, per pod (or Slurm
job), labelled as Prometheus labels a pod's scrape. Tokens follow the job's load: `tokens_per_s` output tokens a
second at 100 % SM, in proportion below it; `prompt_ratio` prompt tokens per output token; a request finished
every `tokens_per_request` output tokens. The counters run from the server's start; after its load ends they
stay flat while the server drains (`linger_s`), so that their final values are scraped, as the agent's are. In a
span of its `unscraped` no sample is kept (a scrape gap, which may span whole hours).

A training job with `work` exports its own counter, `fleetwatt_job_work_units_total{unit}` (docs/metrics.md, "Work
counters"): `per_s` units a second at full load, in proportion below it, and slower under a power limit below its draw
(apps.simulator.power_cap: the pace of its slowest GPU, as a synchronous data-parallel step waits for the last)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from . import power_cap
from .scenario import JobSpec, Scenario, ServingSpec, profile_at

GENERATION_TOKENS = "vllm:generation_tokens_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
REQUEST_SUCCESS = "vllm:request_success_total"
WORK_UNITS = "fleetwatt_job_work_units_total"  # a training job's own counter (docs/metrics.md, "Work counters")
FAMILY_TYPES = dict.fromkeys((GENERATION_TOKENS, PROMPT_TOKENS, REQUEST_SUCCESS, WORK_UNITS), "counter")
HELP = {
    GENERATION_TOKENS: "Number of generation tokens processed.",
    PROMPT_TOKENS: "Number of prefill tokens processed.",
    REQUEST_SUCCESS: "Count of successfully processed requests.",
    WORK_UNITS: "Units of work the job did.",
}


@dataclass(frozen=True)
class ServedTruth:
    """What a server counted over the whole scenario (its final counter values)."""

    output_tokens: float
    prompt_tokens: float
    requests: float


def output_tokens_at(job: JobSpec, spec: ServingSpec, since_start: np.ndarray) -> np.ndarray:
    """Output tokens generated from the job's start to each time (seconds since its start): the integral of
    tokens_per_s x SM% / 100 over its piecewise-constant SM profile, flat after its end."""
    return _load_integral(job, since_start) * spec.tokens_per_s


def _load_integral(job: JobSpec, since_start: np.ndarray) -> np.ndarray:
    """Seconds at full load from the job's start to each time: the integral of its SM% / 100."""
    x = np.clip(since_start, 0.0, float(job.end_s - job.start_s))
    total = np.zeros(len(x))
    for i, (t, sm) in enumerate(job.sm):
        upto = job.sm[i + 1][0] if i + 1 < len(job.sm) else np.inf
        total += sm / 100.0 * np.clip(np.minimum(x, upto) - t, 0.0, None)
    return total


def job_pace(sc: Scenario, job: JobSpec, since_start: float) -> float:
    """The job's pace at a time (seconds since its start) under its GPUs' power limits, as a share of its pace
    uncapped: its slowest GPU's (apps.simulator.power_cap)."""
    assert job.work is not None
    at = job.start_s + since_start
    draw = profile_at(job.power_w, since_start)
    paces = []
    for index in job.gpus:
        limits = [(p.at_s, p.watts) for p in sc.power_limits if p.node == job.node and p.gpu in (None, index)]
        limit = next((w for a, w in sorted(limits, reverse=True) if a <= at), sc.tdp_w)
        paces.append(
            power_cap.pace(draw_w=draw, limit_w=limit, idle_w=sc.idle_power_w, memory_bound=job.work.memory_bound)
        )
    return min(paces) if paces else 1.0


def work_units_at(sc: Scenario, job: JobSpec, since_start: np.ndarray) -> np.ndarray:
    """A training job's own counter from its start to each time (seconds since its start): the integral of
    per_s x SM% / 100 x its pace under its GPUs' power limits, flat after its end."""
    assert job.work is not None
    length = float(job.end_s - job.start_s)
    marks = {0.0, *(float(t) for t, _ in job.sm), *(float(t) for t, _ in job.power_w)}
    marks |= {float(p.at_s - job.start_s) for p in sc.power_limits if p.node == job.node and p.at_s - job.start_s > 0}
    segments = [
        (t, job.work.per_s * profile_at(job.sm, t) / 100.0 * job_pace(sc, job, t))
        for t in sorted(m for m in marks if m < length)
    ]
    return power_cap.paced_integral(since_start, segments=segments, end_s=length)


def served_truth(sc: Scenario, scrapes: np.ndarray) -> dict[str, ServedTruth]:
    """Each server's counts as Prometheus keeps them, by job key: the sum of its counters' scrape-to-scrape rises
    (the whole value after a restart). All of its work, but the seconds before a restart and at the scenario's
    end that no scrape saw."""
    last: dict[str, dict[str, float]] = {}
    for job, family, _, _, values in _series(sc, scrapes):
        if family == WORK_UNITS:
            continue
        steps = np.diff(values, prepend=0.0)
        last.setdefault(job.job_key, {})[family] = float(np.where(steps < 0, values, steps).sum())
    return {
        key: ServedTruth(values[GENERATION_TOKENS], values[PROMPT_TOKENS], values[REQUEST_SUCCESS])
        for key, values in last.items()
    }


def counted_units_truth(sc: Scenario, scrapes: np.ndarray) -> dict[str, float]:
    """Each training job's own counter as Prometheus keeps it: its last scraped value, by job key."""
    return {
        job.job_key: float(values[-1]) for job, family, _, _, values in _series(sc, scrapes) if family == WORK_UNITS
    }


def _where(job: JobSpec, container: str) -> dict[str, str]:
    """The labels a PodMonitor's scrape gives a pod's series (or a Slurm job's, relabelled with hpc_job)."""
    if job.scheduler == "k8s":
        return {"namespace": job.namespace, "pod": job.pod, "container": container}
    return {"hpc_job": job.job_id}


def _labels(job: JobSpec, spec: ServingSpec) -> dict[str, str]:
    return {**_where(job, spec.engine), "engine": "0", "model_name": spec.model}


def serving_series(sc: Scenario, times: np.ndarray) -> Iterator[tuple[str, dict[str, str], np.ndarray, np.ndarray]]:
    """(family, labels, Unix times, values) of every server's counters at the given scrape times (seconds since
    the scenario's start)."""
    for _, family, labels, at, values in _series(sc, times):
        yield family, labels, at, values


def _series(sc: Scenario, times: np.ndarray) -> Iterator[tuple[JobSpec, str, dict[str, str], np.ndarray, np.ndarray]]:
    for job in sc.jobs:
        if job.work is not None:  # its own counter, exported beside its work as long as the job runs
            t = times[(times >= job.start_s + 1) & (times < job.end_s + sc.linger_s) & (times < sc.duration_s)]
            if len(t):
                labels = {**_where(job, "train"), "unit": job.work.unit}
                yield job, WORK_UNITS, labels, t + sc.t0, work_units_at(sc, job, t - job.start_s)
        spec = job.serving
        if spec is None:
            continue
        t = times[(times >= job.start_s + 1) & (times < job.end_s + sc.linger_s) & (times < sc.duration_s)]
        for lo, hi in spec.unscraped:  # no scrape kept: the first one after counts what the gap's seconds made
            t = t[(t < job.start_s + lo) | (t >= job.start_s + hi)]
        if not len(t):
            continue
        since_start = t - job.start_s
        out = output_tokens_at(job, spec, since_start)
        if spec.restarts:  # each restart starts the counters again from 0
            marks = np.array([0, *spec.restarts], dtype=float)
            began = marks[np.searchsorted(marks, since_start, side="right") - 1]
            out = out - output_tokens_at(job, spec, began)
        labels = _labels(job, spec)
        at = t + sc.t0
        yield job, GENERATION_TOKENS, labels, at, out
        yield job, PROMPT_TOKENS, labels, at, out * spec.prompt_ratio
        yield job, REQUEST_SUCCESS, {**labels, "finished_reason": "stop"}, at, np.floor(out / spec.tokens_per_request)
