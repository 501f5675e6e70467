"""One cluster-hour, from query results to rows (pure: plain data in, plain data out).

Agent GPUs: the agent already split every second's energy, so the hour's rows are the exact rises of
its counters. GPUs that only dcgm-exporter reports: one job label on the GPU takes the energy it drew
while present (`whole_gpu`); pods sharing a GPU split it once, by their own utilisation (`sm_time`),
else their own memory (`memory`), else equally (`equal`), never summing the copied series.

Time nobody saw (DESIGN section 8): where the agent missed part of the hour that DCGM's meter covered,
the difference is the GPU-hour's `unobserved_j` (not idle), so jobs + idle + unobserved = the meter; a
dcgm-only GPU-hour with no job label is unobserved whole. Which jobs held the GPU then is the scheduler's
word, applied later (apps.jobs.unobserved).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from apps.jobs.identity import key_storable, text_storable

from . import promql
from .counters import CounterWindow, counter_increase, merge_copies
from .gpu_settings import UNKNOWN, GpuSettings, gpu_settings


class UnknownMethodError(ValueError):
    """An agent's series names a split method this release does not know (a newer agent)."""


class UnknownSeriesError(ValueError):
    """The hour holds GPU series under names fleetwatt does not read (dcgm-exporter 1.x), and none it reads."""


class HostLabelMissingError(ValueError):
    """A dcgm-exporter series carries no host label of the ones the cluster reads: its GPU has no node."""


class SeriesLabelError(ValueError):
    """A series' label is not what its exporter writes (a GPU index that is not a number)."""


# A time an agent's gauge reports (a job's start, when it was last seen) is read only from 2000 to a day past the
# hour: another value (0, NaN, 1e20) is no time, and is left out as if the agent had not reported it.
TIME_MIN_S = 946_684_800.0  # 2000-01-01T00:00:00Z
TIME_AHEAD_S = 86_400.0
MEMORY_MAX_BYTES = 2.0**62


# dcgm-exporter names its host `Hostname`, from 4.8.3 `hostname` (NVIDIA/dcgm-exporter#655); a site may
# relabel the node into `node` or `instance`. A cluster names the one it reads (Cluster.dcgm_host_label);
# empty reads either spelling of dcgm-exporter's own.
DCGM_HOST_LABELS_AUTO = ("Hostname", "hostname")
# The container the GPU Operator and dcgm-exporter's Helm chart run the exporter in: a series whose (scrape
# target's) pod runs it is the GPU's own, never a workload's.
DCGM_EXPORTER_CONTAINERS = frozenset({"nvidia-dcgm-exporter", "dcgm-exporter"})


Labels = Mapping[str, str]


@dataclass
class SeriesWindow:
    labels: dict[str, str]
    window: CounterWindow


@dataclass(frozen=True)
class PodClaims:
    """kube-state-metrics' word on the hour's pods: those it listed, and the GPUs each requested."""

    known: frozenset[tuple[str, str]]  # (namespace, pod)
    gpus: Mapping[tuple[str, str], float]

    def holds_no_gpu(self, job_key: str) -> bool:
        """A pod kube-state-metrics listed that requested no GPU: dcgm-exporter's label on a GPU is then the
        scrape target's (the exporter, whatever its name), never a claim. A pod it did not list keeps the
        label's word: kube-state-metrics missing a pod (down, lagging) is no evidence against it."""
        if not job_key.startswith("k8s/"):
            return False
        namespace, _, pod = job_key.removeprefix("k8s/").partition("/")
        return (namespace, pod) in self.known and self.gpus.get((namespace, pod), 0.0) <= 0.0

    @classmethod
    def from_answer(cls, answer: list[tuple[str, dict[str, str], float]]) -> PodClaims:
        """From HourQueries.pod_gpu_claims' answer, parsed by tag."""
        known: set[tuple[str, str]] = set()
        gpus: dict[tuple[str, str], float] = {}
        for tag, labels, value in answer:
            pod = (
                labels.get("exported_namespace") or labels.get("namespace", ""),
                labels.get("exported_pod") or labels.get("pod", ""),
            )
            if tag == "known":
                known.add(pod)
            elif tag == "gpus":
                gpus[pod] = max(gpus.get(pod, 0.0), value)
        return cls(known=frozenset(known), gpus=gpus)


@dataclass
class HourInput:
    """Everything the queries returned for one cluster-hour, parsed."""

    hour_start: float
    scrape_interval_s: int
    counters: dict[str, list[SeriesWindow]] = field(default_factory=dict)  # agent counters by metric
    dcgm_energy: list[SeriesWindow] = field(default_factory=list)
    job_gauges: list[tuple[str, dict[str, str], float]] = field(default_factory=list)  # (tag, labels, value)
    job_info: list[dict[str, str]] = field(default_factory=list)
    agent_info: list[dict[str, str]] = field(default_factory=list)  # per node: the agent's version
    dcgm_series: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    # Asked only of an hour none of the series above answered: the GPU metric names the endpoint holds
    # instead (dcgm-exporter 1.x's `dcgm_*`, another exporter's), so that the ingest names them.
    foreign_names: list[str] = field(default_factory=list)
    pod_claims: PodClaims | None = None  # where the cluster's Prometheus holds kube-state-metrics
    # Asked only of GPUs with no energy meter (HourQueries.unmetered_signals): (tag, labels, value).
    unmetered_signals: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    # The serving engines' and jobs' work counters (HourQueries.work_counters; apps.telemetry.work).
    work: list[SeriesWindow] = field(default_factory=list)


@dataclass(frozen=True)
class GpuRef:
    uuid: str
    hostname: str
    index: int
    model_name: str


@dataclass
class GpuHourRow:
    uuid: str
    source: str
    device_energy_j: float
    agent_energy_j: float | None
    dcgm_energy_j: float | None
    jobs_energy_j: float = 0.0
    idle_energy_j: float = 0.0
    unattributed_j: float = 0.0
    unobserved_j: float = 0.0  # energy of time no observer of jobs saw (DCGM's meter less the agent's)
    unobserved_s: float = 0.0  # seconds of the hour no observer of jobs saw
    residual_j: float | None = None
    residual_ratio: float | None = None
    sampled_s: float = 0.0
    occupied_s: float = 0.0
    counter_resets: int = 0
    agent_version: str = ""
    contract_gaps: list[str] = field(default_factory=list)  # extension series the agent did not export
    settings: GpuSettings = UNKNOWN  # its power limit and SM clock (apps.telemetry.gpu_settings)


@dataclass
class JobGpuHourRow:
    job_key: str
    uuid: str
    source: str
    energy_by_method: dict[str, float] = field(default_factory=dict)
    sampled_s: float = 0.0
    sm_s: float = 0.0
    occupancy_s: float = 0.0
    peak_memory_bytes: int = 0
    job_start: float | None = None
    first_seen: float | None = None
    last_seen: float | None = None

    @property
    def energy_j(self) -> float:
        return sum(self.energy_by_method.values())


@dataclass(frozen=True)
class JobMeta:
    job_key: str
    scheduler: str = ""
    job_id: str = ""
    user: str = ""
    account: str = ""
    namespace: str = ""
    pod: str = ""
    name: str = ""


@dataclass(frozen=True)
class MeterlessGpu:
    """A GPU dcgm-exporter reports without an energy meter (a vGPU guest, or an exporter configured without
    the field): what is missing, so that the ingest says it rather than store a zero, and what is known."""

    uuid: str
    hostname: str
    missing: tuple[str, ...]
    utilisation_pct: float | None = None  # mean of the hour's samples
    memory_used_mib: float | None = None  # mean framebuffer used
    memory_peak_mib: float | None = None
    seen_s: float = 0.0  # seconds of the hour its series were there
    jobs_s: tuple[tuple[str, float], ...] = ()  # (job key, seconds held) of the jobs labelled on it


@dataclass(frozen=True)
class UnclaimedPod:
    """A pod dcgm-exporter's labels put on GPUs, that kube-state-metrics says requested no GPU: not charged."""

    job_key: str
    uuids: tuple[str, ...]


@dataclass
class HourResult:
    gpus: dict[str, GpuRef]
    gpu_hours: list[GpuHourRow]
    job_hours: list[JobGpuHourRow]
    jobs: dict[str, JobMeta]
    meterless: list[MeterlessGpu] = field(default_factory=list)
    unclaimed: list[UnclaimedPod] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # the agents' words made storable (apps.jobs.identity)


def _gpu_index(labels: Labels, uuid: str) -> int:
    """A series' `gpu` label: the GPU's index on its node (0 where the label is absent)."""
    raw = labels.get("gpu", "") or "0"
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6):
        raise SeriesLabelError(
            f"the series of GPU {uuid[:80]!r} label it gpu={raw[:40]!r}, not an index. Nothing was written for this "
            "hour."
        )
    return int(raw)


def _first(labels: Labels, *names: str) -> str:
    for name in names:
        if labels.get(name):
            return labels[name]
    return ""


def dcgm_uuid(labels: Labels) -> str:
    return _first(labels, "UUID", "uuid")


def dcgm_host(labels: Labels, host_label: str = "") -> str:
    """The node of a dcgm-exporter series, by the cluster's host label ('' : `Hostname` or `hostname`)."""
    return labels.get(host_label, "") if host_label else _first(labels, *DCGM_HOST_LABELS_AUTO)


def dcgm_job_key(labels: Labels) -> str:
    """The job a dcgm-exporter series is labelled with, or '' for a GPU-level series.

    Prometheus renames the exporter's `pod`/`namespace`/`container` to `exported_*` where they clash with
    the scrape target's own (kube-prometheus-stack without honorLabels): then `exported_*` is the workload
    and `pod` the exporter. A pod that is the exporter itself (an idle GPU's series carry the target's
    labels only) is no job."""
    if labels.get("exported_pod"):
        pod, namespace, container = (labels.get(f"exported_{n}", "") for n in ("pod", "namespace", "container"))
    else:
        pod, namespace, container = (labels.get(n, "") for n in ("pod", "namespace", "container"))
    exporter = container in DCGM_EXPORTER_CONTAINERS or (container == "exporter" and "dcgm-exporter" in pod)
    if pod and not exporter:
        return f"k8s/{namespace}/{pod}"
    hpc_job = labels.get("hpc_job", "")
    return f"slurm/{hpc_job}" if hpc_job else ""


def _increases(
    series: list[SeriesWindow],
    key: Callable[[Labels], tuple[str, ...]],
    *,
    hour_start: float,
) -> dict[tuple[str, ...], float]:
    """Exact rise per key; duplicate series of one key (two scrape jobs of one agent) count once."""
    out: dict[tuple[str, ...], float] = {}
    for s in series:
        k = key(s.labels)
        rise = counter_increase(s.window, hour_start=hour_start, new_series_from_zero=True)
        out[k] = max(rise, out.get(k, 0.0))
    return out


def _by_host(labels: Labels) -> tuple[str, ...]:
    return (labels.get("hostname", ""),)


def _by_uuid(labels: Labels) -> tuple[str, ...]:
    return (labels.get("uuid", ""),)


def _by_uuid_job(labels: Labels) -> tuple[str, ...]:
    return (labels.get("uuid", ""), labels.get("job_key", ""))


def _by_uuid_job_method(labels: Labels) -> tuple[str, ...]:
    return (labels.get("uuid", ""), labels.get("job_key", ""), labels.get("method", ""))


def hour_compute(data: HourInput, *, dcgm_host_label: str = "") -> HourResult:
    """All rows of one cluster-hour. `dcgm_host_label`: the label naming a dcgm-exporter series' node ('':
    `Hostname` or `hostname`); a series without it is refused (HostLabelMissingError), not put on a node ''."""
    t0 = data.hour_start
    gpus: dict[str, GpuRef] = {}
    models: dict[str, str] = {}

    def counters(metric: str) -> list[SeriesWindow]:
        return data.counters.get(metric, [])

    # --- the agent's GPUs
    for s in counters(promql.GPU_ENERGY):
        uuid = s.labels.get("uuid", "")
        if uuid and s.window.last is not None:
            gpus.setdefault(uuid, GpuRef(uuid, s.labels.get("hostname", ""), _gpu_index(s.labels, uuid), ""))
    device = _increases(counters(promql.GPU_ENERGY), _by_uuid, hour_start=t0)
    idle = _increases(counters(promql.GPU_IDLE_ENERGY), _by_uuid, hour_start=t0)
    resets = _increases(counters(promql.GPU_COUNTER_RESETS), _by_uuid, hour_start=t0)
    gpu_sampled = _increases(counters(promql.GPU_SAMPLED), _by_uuid, hour_start=t0)
    agent_uuids = {u for (u,) in device if u in gpus and (device[(u,)] > 0 or gpu_sampled.get((u,), 0) > 0)}

    # --- the agent's jobs
    energy = _increases(counters(promql.JOB_ENERGY), _by_uuid_job_method, hour_start=t0)
    sampled = _increases(counters(promql.JOB_SAMPLED), _by_uuid_job, hour_start=t0)
    sm = _increases(counters(promql.JOB_SM), _by_uuid_job, hour_start=t0)
    occupancy = _increases(counters(promql.JOB_OCCUPANCY), _by_uuid_job, hour_start=t0)
    ticks = _increases(counters(promql.AGENT_SAMPLES), _by_host, hour_start=t0)
    versions = {labels.get("hostname", ""): labels.get("version", "") for labels in data.agent_info}
    memory: dict[tuple[str, str], float] = {}
    last_seen: dict[tuple[str, str], float] = {}
    start: dict[str, float] = {}
    latest_s = t0 + 3600.0 + TIME_AHEAD_S
    for tag, labels, value in data.job_gauges:
        key = (labels.get("uuid", ""), labels.get("job_key", ""))
        if tag == "memory" and 0.0 <= value <= MEMORY_MAX_BYTES:  # (NaN fails both)
            memory[key] = max(value, memory.get(key, 0.0))
        elif tag == "last_seen" and TIME_MIN_S <= value <= latest_s:
            last_seen[key] = max(value, last_seen.get(key, 0.0))
        elif tag == "start" and TIME_MIN_S <= value <= latest_s:
            job_key = labels.get("job_key", "")
            start[job_key] = min(value, start.get(job_key, value))

    rows: dict[tuple[str, str], JobGpuHourRow] = {}

    def row(uuid: str, job_key: str) -> JobGpuHourRow:
        if (uuid, job_key) not in rows:
            rows[(uuid, job_key)] = JobGpuHourRow(job_key=job_key, uuid=uuid, source="agent")
        return rows[(uuid, job_key)]

    for (uuid, job_key, method), joules in energy.items():
        if uuid in agent_uuids and joules > 0:
            if method not in promql.AGENT_METHODS:
                host = gpus[uuid].hostname
                raise UnknownMethodError(
                    f"The agent on {host or uuid} reports job {job_key!r} under method {method!r}, which this "
                    f"release of fleetwatt does not know ({', '.join(sorted(promql.AGENT_METHODS))}): upgrade "
                    "fleetwatt to the agent's release. Nothing was written for this hour."
                )
            row(uuid, job_key).energy_by_method[method] = joules
    for (uuid, job_key), seconds in sampled.items():
        if uuid in agent_uuids and seconds > 0:
            row(uuid, job_key).sampled_s = seconds
    for (uuid, job_key), seconds in occupancy.items():
        if uuid in agent_uuids and seconds > 0:
            row(uuid, job_key).occupancy_s = seconds
    for (uuid, job_key), r in rows.items():
        r.sm_s = sm.get((uuid, job_key), 0.0)
        r.peak_memory_bytes = int(memory.get((uuid, job_key), 0))
        r.last_seen = last_seen.get((uuid, job_key))
        r.job_start = start.get(job_key)
    gaps = _contract_fallback(
        rows=rows,
        gpus=gpus,
        agent_uuids=agent_uuids,
        gpu_sampled=gpu_sampled,
        occupancy=occupancy,
        ticks=ticks,
        hour_end=t0 + 3600.0,
    )

    # --- dcgm-exporter: the reference energy of every GPU, and attribution where no agent reports
    _dcgm_hosts_check([s.labels for s in data.dcgm_energy] + [lb for _, lb, _ in data.dcgm_series], dcgm_host_label)
    copies: dict[str, list[CounterWindow]] = defaultdict(list)
    for s in data.dcgm_energy:
        uuid = dcgm_uuid(s.labels)
        if not uuid:
            continue
        copies[uuid].append(s.window)
        if s.labels.get("modelName"):
            models[uuid] = s.labels["modelName"]
        if uuid not in gpus and s.window.last is not None:
            gpus[uuid] = GpuRef(uuid, dcgm_host(s.labels, dcgm_host_label), _gpu_index(s.labels, uuid), "")
    dcgm_energy: dict[str, float] = {}
    dcgm_resets: dict[str, int] = {}
    for uuid, windows in copies.items():
        merged = merge_copies(windows)
        if merged.last is None:
            continue
        dcgm_energy[uuid] = counter_increase(merged, hour_start=t0, new_series_from_zero=False) / 1000.0
        dcgm_resets[uuid] = int(merged.resets > 0 or merged.needs_raw_samples())

    dcgm_rows, dcgm_gpu, unclaimed = _dcgm_attribution(data, dcgm_energy, exclude=agent_uuids)

    jobs_j_by_gpu: dict[str, float] = defaultdict(float)
    occupied_by_gpu: dict[str, float] = defaultdict(float)
    for (u, _), r in rows.items():
        jobs_j_by_gpu[u] += r.energy_j
        occupied_by_gpu[u] += r.occupancy_s
    gpu_hours: list[GpuHourRow] = []
    for uuid in sorted(agent_uuids):
        agent_j = device[(uuid,)]
        jobs_j = jobs_j_by_gpu[uuid]
        idle_j = idle.get((uuid,), 0.0)
        dcgm_j = dcgm_energy.get(uuid)
        sampled_s = gpu_sampled.get((uuid,), 0.0)
        unseen_s, unseen_j = unobserved_part(agent_j=agent_j, dcgm_j=dcgm_j, sampled_s=sampled_s)
        device_j = agent_j + unseen_j
        residual = device_j - dcgm_j if dcgm_j is not None else None
        gpu_hours.append(
            GpuHourRow(
                uuid=uuid,
                source="agent",
                device_energy_j=device_j,
                agent_energy_j=agent_j,
                dcgm_energy_j=dcgm_j,
                jobs_energy_j=jobs_j,
                idle_energy_j=idle_j,
                unattributed_j=agent_j - jobs_j - idle_j,
                unobserved_j=unseen_j,
                unobserved_s=unseen_s,
                residual_j=residual,
                residual_ratio=(residual / dcgm_j) if residual is not None and dcgm_j else None,
                sampled_s=sampled_s,
                occupied_s=occupied_by_gpu[uuid],
                counter_resets=round(resets.get((uuid,), 0.0)),
                agent_version=versions.get(gpus[uuid].hostname, ""),
                contract_gaps=gaps.get(uuid, []),
            )
        )
    for uuid, gpu_row in sorted(dcgm_gpu.items()):
        gpu_row.counter_resets = dcgm_resets.get(uuid, 0)
        gpu_hours.append(gpu_row)
    settings = gpu_settings(job_gauges=data.job_gauges, dcgm_series=data.dcgm_series)
    for gpu_row in gpu_hours:
        gpu_row.settings = settings.get(gpu_row.uuid, UNKNOWN)

    for uuid, model in models.items():
        if uuid in gpus:
            g = gpus[uuid]
            gpus[uuid] = GpuRef(g.uuid, g.hostname, g.index, model)

    job_rows = [r for r in rows.values() if r.energy_j > 0 or r.sampled_s > 0 or r.occupancy_s > 0]
    job_rows += dcgm_rows
    jobs = _job_metas(data.job_info, {r.job_key for r in job_rows})
    meterless = meterless_gpus(data, metered=set(dcgm_energy) | agent_uuids, dcgm_host_label=dcgm_host_label)
    if not gpus and not meterless and data.foreign_names:
        raise UnknownSeriesError(
            f"No series fleetwatt reads in this hour, but GPU series named {', '.join(sorted(data.foreign_names))}. "
            f"fleetwatt reads {promql.DCGM_ENERGY} (or {promql.DCGM_POWER}) from dcgm-exporter 2.x and later, or "
            f"{promql.GPU_ENERGY} from fleetwatt-agent (docs/metrics.md); dcgm-exporter 1.x's dcgm_* names are "
            "not read: upgrade the exporter. Nothing was written for this hour."
        )
    repaired = _keys_storable(job_rows, jobs)
    return HourResult(
        gpus=gpus, gpu_hours=gpu_hours, job_hours=job_rows, jobs=jobs, meterless=meterless, unclaimed=unclaimed,
        repaired=repaired,
    )  # fmt: skip


def _dcgm_hosts_check(labels: list[dict[str, str]], host_label: str) -> None:
    """Every dcgm-exporter series of a GPU names its node, by the cluster's host label."""
    missing = sorted({dcgm_uuid(lb) for lb in labels if dcgm_uuid(lb) and not dcgm_host(lb, host_label)})
    if missing:
        wanted = f"`{host_label}`" if host_label else "`Hostname` or `hostname`"
        raise HostLabelMissingError(
            f"dcgm-exporter series of {len(missing)} GPU(s) ({', '.join(missing[:5])}) carry no host label "
            f"{wanted}: set the cluster's dcgm_host_label to the label that names the node (Hostname, hostname, "
            "node, instance; docs/config.md), or have Prometheus relabel one in. Nothing was written for this hour."
        )


def meterless_gpus(data: HourInput, *, metered: set[str], dcgm_host_label: str = "") -> list[MeterlessGpu]:
    """GPUs dcgm-exporter reports (framebuffer or power seen in the hour) with no energy counter: no energy
    can be stored for them; the ingest names them with the fields they lack, and keeps what is known of them."""
    seen: dict[str, str] = {}
    powered: set[str] = set()
    for tag, labels, _ in data.dcgm_series:
        uuid = dcgm_uuid(labels)
        if uuid and uuid not in metered and tag in ("present", "power_sum"):
            seen.setdefault(uuid, dcgm_host(labels, dcgm_host_label))
            if tag == "power_sum":
                powered.add(uuid)
    signals = _unmetered_signals(data, step=float(data.scrape_interval_s))
    gpus = []
    for uuid, host in sorted(seen.items()):
        known = signals.get(uuid, _UnmeteredSignals())
        gpus.append(
            MeterlessGpu(
                uuid=uuid,
                hostname=host,
                missing=(promql.DCGM_ENERGY,) if uuid in powered else (promql.DCGM_ENERGY, promql.DCGM_POWER),
                utilisation_pct=known.mean(known.util),
                memory_used_mib=known.mean(known.fb),
                memory_peak_mib=known.fb_peak,
                seen_s=min(3600.0, sum(known.samples.values()) * float(data.scrape_interval_s)),
                jobs_s=tuple(sorted(known.jobs_s.items())),
            )
        )
    return gpus


@dataclass
class _UnmeteredSignals:
    """One unmetered GPU's series (its own, and each job's over its part of the hour), summed."""

    samples: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)  # per series: samples
    util: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)  # per series: mean
    fb: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)
    fb_peak: float | None = None
    jobs_s: dict[str, float] = field(default_factory=dict)

    def mean(self, means: dict[tuple[tuple[str, str], ...], float]) -> float | None:
        """The mean of the series' means, each weighted by its samples (the series follow one another)."""
        weights = {series: self.samples.get(series, 0.0) for series in means}
        total = sum(weights.values())
        return sum(means[s] * w for s, w in weights.items()) / total if total > 0 else None


def _unmetered_signals(data: HourInput, *, step: float) -> dict[str, _UnmeteredSignals]:
    out: dict[str, _UnmeteredSignals] = defaultdict(_UnmeteredSignals)
    for tag, labels, value in data.unmetered_signals:
        uuid = dcgm_uuid(labels)
        if not uuid:
            continue
        gpu, series = out[uuid], tuple(sorted(labels.items()))
        match tag:
            case "samples":
                gpu.samples[series] = value
                job_key = dcgm_job_key(labels)
                if job_key and not (data.pod_claims is not None and data.pod_claims.holds_no_gpu(job_key)):
                    gpu.jobs_s[job_key] = min(3600.0, gpu.jobs_s.get(job_key, 0.0) + value * step)
            case "util":
                gpu.util[series] = value
            case "fb_avg":
                gpu.fb[series] = value
            case "fb_max":
                gpu.fb_peak = value if gpu.fb_peak is None else max(gpu.fb_peak, value)
    return out


# Seconds of an hour the agent may miss before the meter's difference counts as unobserved energy: below
# it, the difference is the two meters' disagreement (the conservation check's business), not a gap.
UNSEEN_MIN_S = 18.0  # 0.5 % of the hour


def unobserved_part(*, agent_j: float, dcgm_j: float | None, sampled_s: float) -> tuple[float, float]:
    """(seconds, joules) of an agent GPU-hour that the agent did not see. The joules are DCGM's meter less the
    agent's, where DCGM saw the hour and the agent missed at least UNSEEN_MIN_S of it; 0 where DCGM did not
    (nothing measured them: the time stays, its energy is unknown)."""
    unseen_s = max(0.0, 3600.0 - sampled_s)
    if unseen_s < UNSEEN_MIN_S:
        return 0.0, 0.0
    if dcgm_j is None:
        return unseen_s, 0.0
    return unseen_s, max(0.0, dcgm_j - agent_j)


def _contract_fallback(
    *,
    rows: dict[tuple[str, str], JobGpuHourRow],
    gpus: dict[str, GpuRef],
    agent_uuids: set[str],
    gpu_sampled: dict[tuple[str, ...], float],
    occupancy: dict[tuple[str, ...], float],
    ticks: dict[tuple[str, ...], float],
    hour_end: float,
) -> dict[str, list[str]]:
    """An agent older than docs/metrics.md's extensions exports no GPU sampled seconds, job occupancy or
    last-seen series. Never a silent zero: its GPU's sampled seconds come from the node's ticks (1 Hz),
    each job's occupancy from its sampled seconds, scaled so the jobs together occupy no more than the
    GPU's sampled time (exact for a job alone on its GPU), and a job's last sample from the hour's end.
    Fills `gpu_sampled` and the rows in place; returns, per GPU, the extensions that were missing."""
    gaps: dict[str, list[str]] = {}
    by_gpu: dict[str, list[JobGpuHourRow]] = defaultdict(list)
    for (u, _), r in rows.items():
        by_gpu[u].append(r)
    for uuid in agent_uuids:
        missing = []
        if (uuid,) not in gpu_sampled:
            missing.append(promql.GPU_SAMPLED)
            gpu_sampled[(uuid,)] = min(3600.0, ticks.get((gpus[uuid].hostname,), 0.0))
        on_gpu = by_gpu.get(uuid, [])
        if any((uuid, r.job_key) not in occupancy for r in on_gpu):
            missing.append(promql.JOB_OCCUPANCY)
            seen_s = gpu_sampled[(uuid,)] or max((r.sampled_s for r in on_gpu), default=0.0)
            present_s = sum(r.sampled_s for r in on_gpu)
            scale = min(1.0, seen_s / present_s) if present_s else 0.0
            for r in on_gpu:
                if (uuid, r.job_key) not in occupancy:
                    r.occupancy_s = r.sampled_s * scale
        if any(r.last_seen is None and r.sampled_s > 0 for r in on_gpu):
            missing.append(promql.EXTENSIONS[2])
            for r in on_gpu:
                if r.last_seen is None and r.sampled_s > 0:
                    r.last_seen = hour_end
        if missing:
            gaps[uuid] = missing
    return gaps


@dataclass
class _PodStats:
    samples: float = 0.0
    power_sum: float = 0.0
    first: float | None = None
    last: float | None = None
    util: float | None = None
    fb_avg: float = 0.0
    fb_max: float = 0.0


def _dcgm_attribution(
    data: HourInput, energy_j: dict[str, float], *, exclude: set[str]
) -> tuple[list[JobGpuHourRow], dict[str, GpuHourRow], list[UnclaimedPod]]:
    """Split each dcgm-only GPU-hour's energy between the jobs labelled on it, once. A pod that requested no
    GPU (kube-state-metrics) is no job: its series are the GPU's own, as an unlabelled one is."""
    t0, step = data.hour_start, float(data.scrape_interval_s)
    pods: dict[str, dict[str, _PodStats]] = defaultdict(lambda: defaultdict(_PodStats))
    gpu_level: dict[str, _PodStats] = defaultdict(_PodStats)
    unclaimed: dict[str, set[str]] = defaultdict(set)
    for tag, labels, value in data.dcgm_series:
        uuid = dcgm_uuid(labels)
        if not uuid or uuid in exclude:
            continue
        job_key = dcgm_job_key(labels)
        if job_key and data.pod_claims is not None and data.pod_claims.holds_no_gpu(job_key):
            unclaimed[job_key].add(uuid)
            job_key = ""
        stats = pods[uuid][job_key] if job_key else gpu_level[uuid]
        match tag:
            case "samples":
                stats.samples = max(stats.samples, value)
            case "power_sum":
                stats.power_sum = max(stats.power_sum, value)
            case "first":
                stats.first = value if stats.first is None else min(stats.first, value)
            case "last":
                stats.last = value if stats.last is None else max(stats.last, value)
            case "util":
                stats.util = value if stats.util is None else max(stats.util, value)
            case "fb_avg":
                stats.fb_avg = max(stats.fb_avg, value)
            case "fb_max":
                stats.fb_max = max(stats.fb_max, value)

    job_rows: list[JobGpuHourRow] = []
    gpu_rows: dict[str, GpuHourRow] = {}
    for uuid, total_j in energy_j.items():
        if uuid in exclude:
            continue
        present = {k: p for k, p in pods.get(uuid, {}).items() if p.samples > 0}
        gpu_row = GpuHourRow(
            uuid=uuid, source="dcgm", device_energy_j=total_j, agent_energy_j=None, dcgm_energy_j=total_j
        )
        gpu_rows[uuid] = gpu_row
        if not present:
            # Nothing says which job, if any, used it: unobserved (the scheduler may say, later).
            gpu_row.unobserved_j, gpu_row.unobserved_s = total_j, 3600.0
            continue
        intervals = {k: _presence(p, t0, step) for k, p in present.items()}
        union_s = _union_length(list(intervals.values()))
        durations = {k: b - a for k, (a, b) in intervals.items()}
        overlap = sum(durations.values()) > union_s + step / 2
        # Power integral while each job was present; copies during an overlap are the same power.
        power_int = {k: p.power_sum * step for k, p in present.items()}
        scale = union_s / sum(durations.values()) if sum(durations.values()) > 0 else 1.0
        occupied_int = sum(power_int.values()) * scale
        idle_int = gpu_level[uuid].power_sum * step if uuid in gpu_level else 0.0
        jobs_j = total_j * occupied_int / (occupied_int + idle_int) if occupied_int + idle_int > 0 else total_j
        method, weights = _dcgm_weights(present, power_int, overlap)
        weight_sum = sum(weights.values())
        for job_key, p in present.items():
            share = weights[job_key] / weight_sum if weight_sum > 0 else 1.0 / len(present)
            a, b = intervals[job_key]
            job_rows.append(
                JobGpuHourRow(
                    job_key=job_key,
                    uuid=uuid,
                    source="dcgm",
                    energy_by_method={method: jobs_j * share},
                    # A range holds a sample at both ends of the hour (61 x 60 s): never more than the hour.
                    sampled_s=min(p.samples * step, 3600.0),
                    sm_s=(p.util or 0.0) / 100.0 * p.samples * step,
                    occupancy_s=durations[job_key] * scale,
                    peak_memory_bytes=int(p.fb_max * 1024 * 1024),
                    first_seen=a,
                    last_seen=b,
                )
            )
        gpu_row.jobs_energy_j = jobs_j
        gpu_row.idle_energy_j = total_j - jobs_j
        gpu_row.occupied_s = union_s
    return job_rows, gpu_rows, [UnclaimedPod(key, tuple(sorted(uuids))) for key, uuids in sorted(unclaimed.items())]


def _presence(p: _PodStats, t0: float, step: float) -> tuple[float, float]:
    """The part of the hour a series was present: from its first sample (or the hour's start, when it
    was there before) to one scrape interval past its last."""
    first = p.first if p.first is not None and p.first > t0 else t0
    last = p.last if p.last is not None else first
    return first, min(t0 + 3600.0, max(first, last) + step)


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _dcgm_weights(
    present: dict[str, _PodStats], power_int: dict[str, float], overlap: bool
) -> tuple[str, dict[str, float]]:
    if not overlap:
        return "whole_gpu", power_int
    utils = [p.util for p in present.values() if p.util is not None]
    if len(utils) == len(present) and max(utils) - min(utils) > 1e-6 and max(utils) > 0:
        return "sm_time", {k: (p.util or 0.0) * p.samples for k, p in present.items()}
    fbs = [p.fb_avg for p in present.values()]
    if max(fbs) - min(fbs) > 1e-6 and max(fbs) > 0:
        return "memory", {k: p.fb_avg * p.samples for k, p in present.items()}
    return "equal", {k: p.samples for k in present for p in [present[k]]}


_META_TEXT = ("scheduler", "job_id", "user", "account", "namespace", "pod", "name")


def _job_metas(infos: list[dict[str, str]], job_keys: set[str]) -> dict[str, JobMeta]:
    metas: dict[str, JobMeta] = {}
    for labels in infos:
        key = labels.get("job_key", "")
        if key:
            metas[key] = JobMeta(job_key=key, **{name: labels.get(name, "") for name in _META_TEXT})
    for key in job_keys:
        if key not in metas:
            metas[key] = _meta_from_key(key)
    return metas


def _keys_storable(job_rows: list[JobGpuHourRow], jobs: dict[str, JobMeta]) -> list[str]:
    """The hour's job keys and the words of its jobs' `job_info` (names, users...) as they can be stored
    (apps.jobs.identity), in place; what was changed, a line per job."""
    notes: list[str] = []
    for row in job_rows:
        row.job_key = key_storable(row.job_key)
    for key in list(jobs):
        meta = jobs.pop(key)
        stored = key_storable(key)
        changes = [f"its key stored as {stored!r}"] if stored != key else []
        words: dict[str, str] = {}
        for name in _META_TEXT:
            words[name], changed = text_storable(getattr(meta, name))
            changes += [f"its {name}: {change}" for change in changed]
        jobs[stored] = JobMeta(job_key=stored, **words)
        if changes:
            notes.append(f"job {key[:60]!r}: {'; '.join(changes)}")
    return notes


def _meta_from_key(job_key: str) -> JobMeta:
    """Jobs seen only through dcgm-exporter labels: what the key itself says."""
    parts = job_key.split("/")
    if parts[0] == "k8s" and len(parts) >= 3:
        return JobMeta(
            job_key=job_key, scheduler="k8s", job_id=parts[2], namespace=parts[1], pod=parts[2], name=parts[2]
        )
    if parts[0] == "slurm" and len(parts) >= 2:
        return JobMeta(job_key=job_key, scheduler="slurm", job_id=parts[1])
    return JobMeta(job_key=job_key, scheduler=parts[0])
