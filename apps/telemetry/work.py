"""Work counted where it is already counted (pure): the tokens and requests serving engines count in Prometheus,
and the units of a job's own work counter, per closed hour and tied to the job that served them.

The counters read are configured per cluster (apps.fleet.work_counters; `work_counters` in the fleet config), by
default vLLM's, Hugging Face TGI's, SGLang's and Triton's (its TensorRT-LLM backend's token
histograms), and fleetwatt's own `fleetwatt_job_work_units_total{unit}`, the one-liner a training job exports
(docs/metrics.md, "Work counters"). A series is tied to its job by the labels Prometheus gives a pod's scrape
(`namespace`, `pod`; `exported_*` where they clash with the target's), else `hpc_job` (Slurm), else a `job_key`
label the counter carries itself. The rise of each counter over the hour is exact (apps.telemetry.counters; a
new series, an engine started within the hour, counts from 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apps.fleet.work_counters import KINDS, OUTPUT_TOKENS, REQUESTS, UNITS

from .counters import counter_increase
from .hour import SeriesWindow
from .promql import MODEL_TAG, WORK_TAG

# Labels of the scrape, not of the work: two scrape jobs reading one engine are one series.
SCRAPE_LABELS = frozenset({"instance", "job"})
DEFAULT_UNIT = "unit"  # a job's own counter without a `unit` label
MODEL_MAX = 255


@dataclass(frozen=True)
class WorkRow:
    """The work one job counted in one hour, per engine, model and (for its own counter) unit."""

    job_key: str
    engine: str
    model: str = ""
    unit: str = ""
    output_tokens: float = 0.0
    prompt_tokens: float = 0.0
    requests: float = 0.0
    units: float = 0.0


@dataclass(frozen=True)
class UnjoinedWork:
    """Work counted by series no label ties to a job (an engine scraped without its pod's labels): not stored; the
    ingest names it (`IngestedHour.stats.work_without_job`)."""

    engine: str
    model: str
    where: str  # the series' labels that say where it came from (instance, job_key...), for the admin
    output_tokens: float = 0.0
    requests: float = 0.0
    units: float = 0.0


def work_job_key(labels: Mapping[str, str]) -> str:
    """The job a work series is labelled with, as the agent and dcgm-exporter key it ("" : none)."""
    if labels.get("job_key"):
        return labels["job_key"]
    if labels.get("exported_pod"):
        pod, namespace = labels["exported_pod"], labels.get("exported_namespace", "")
    else:
        pod, namespace = labels.get("pod", ""), labels.get("namespace", "")
    if pod:
        return f"k8s/{namespace}/{pod}"
    return f"slurm/{labels['hpc_job']}" if labels.get("hpc_job") else ""


def work_rows(series: Iterable[SeriesWindow], *, hour_start: float) -> tuple[list[WorkRow], list[UnjoinedWork]]:
    """The hour's work per job, engine, model and unit, from the counter windows the work query answered (each
    labelled with WORK_TAG "<engine>/<kind>" and its model in MODEL_TAG). Duplicate series of one scrape target
    count once; rows that counted nothing are left out."""
    rises: dict[tuple[tuple[str, str], ...], tuple[Mapping[str, str], float]] = {}
    for s in series:
        series_key = tuple(sorted((k, v) for k, v in s.labels.items() if k not in SCRAPE_LABELS))
        rise = counter_increase(s.window, hour_start=hour_start, new_series_from_zero=True)
        if series_key not in rises or rise > rises[series_key][1]:
            rises[series_key] = (s.labels, rise)
    sums: dict[tuple[str, str, str, str], dict[str, float]] = {}
    where: dict[tuple[str, str, str, str], str] = {}
    for labels, rise in rises.values():
        engine, _, kind = labels.get(WORK_TAG, "").partition("/")
        if kind not in KINDS or rise <= 0.0:
            continue
        job_key = work_job_key(labels)
        model = labels.get(MODEL_TAG, "")[:MODEL_MAX]
        unit = (labels.get("unit") or DEFAULT_UNIT)[:30] if kind == UNITS else ""
        key = (job_key, engine, model, unit)
        sums.setdefault(key, dict.fromkeys(KINDS, 0.0))[kind] += rise
        if not job_key:
            where[key] = _where(labels)
    rows, unjoined = [], []
    for (job_key, engine, model, unit), amounts in sorted(sums.items()):
        if job_key:
            rows.append(WorkRow(job_key=job_key, engine=engine, model=model, unit=unit, **amounts))
        else:
            unjoined.append(
                UnjoinedWork(
                    engine=engine,
                    model=model,
                    where=where[(job_key, engine, model, unit)],
                    output_tokens=amounts[OUTPUT_TOKENS],
                    requests=amounts[REQUESTS],
                    units=amounts[UNITS],
                )
            )
    return rows, unjoined


def _where(labels: Mapping[str, str]) -> str:
    shown = [f'{k}="{labels[k]}"' for k in ("instance", "job", "namespace", "service") if labels.get(k)]
    return ",".join(shown)[:200]


def work_of_unknown_job(row: WorkRow) -> UnjoinedWork:
    """Work whose labels name a job the cluster does not have (no GPU of it was seen): not stored, named."""
    return UnjoinedWork(
        engine=row.engine,
        model=row.model,
        where=f'job_key="{row.job_key}"'[:200],
        output_tokens=row.output_tokens,
        requests=row.requests,
        units=row.units,
    )
