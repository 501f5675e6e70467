"""The fleet simulator's engine: what each GPU, its agent and dcgm-exporter would report, and what
kube-state-metrics says of the Kubernetes pods.

Every input (power, SM time, memory, presence, agent up or down) is piecewise constant between
breakpoints on whole seconds, so every counter is piecewise linear and exact at each 1 Hz tick: the
agent's counters advance once a second by that second's energy, split as the agent splits it
(DESIGN section 2). A scrape at time t reads the counters after the last tick at or before t.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from . import serving
from .scenario import JobSpec, NodeSpec, Scenario, profile_at

# Exposed metric families: (name as exposed, type). Counters end in _total except dcgm's, as in the wild.
GPU_ENERGY = "fleetwatt_gpu_energy_joules_total"
GPU_IDLE = "fleetwatt_gpu_idle_energy_joules_total"
GPU_POWER = "fleetwatt_gpu_power_watts"
GPU_MEMORY = "fleetwatt_gpu_memory_used_bytes"
GPU_RESETS = "fleetwatt_gpu_energy_counter_resets_total"
GPU_SAMPLED = "fleetwatt_gpu_sampled_seconds_total"
GPU_POWER_LIMIT = "fleetwatt_gpu_power_limit_watts"
GPU_SM_CLOCK = "fleetwatt_gpu_sm_clock_hertz"
JOB_ENERGY = "fleetwatt_job_energy_joules_total"
JOB_SAMPLED = "fleetwatt_job_sampled_seconds_total"
JOB_SM = "fleetwatt_job_sm_seconds_total"
JOB_OCCUPANCY = "fleetwatt_job_occupancy_seconds_total"
JOB_MEMORY = "fleetwatt_job_gpu_memory_bytes"
JOB_LAST_SEEN = "fleetwatt_job_last_seen_time_seconds"
JOB_START = "fleetwatt_job_start_time_seconds"
JOB_INFO = "fleetwatt_job_info"
AGENT_INFO = "fleetwatt_agent_info"
AGENT_SAMPLES = "fleetwatt_agent_samples_total"
AGENT_MISSED = "fleetwatt_agent_missed_samples_total"
DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_POWER_MGMT_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
DCGM_SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
# kube-state-metrics v2's pod families (internal/store/pod.go): every one a gauge, labelled namespace, pod, uid.
KSM_POD_INFO = "kube_pod_info"
KSM_POD_LABELS = "kube_pod_labels"
KSM_POD_OWNER = "kube_pod_owner"
KSM_POD_PHASE = "kube_pod_status_phase"
KSM_POD_TERMINATED_REASON = "kube_pod_container_status_terminated_reason"
KSM_POD_CREATED = "kube_pod_created"
KSM_POD_START_TIME = "kube_pod_start_time"
KSM_POD_COMPLETION_TIME = "kube_pod_completion_time"
KSM_POD_REQUESTS = "kube_pod_container_resource_requests"
KSM_FAMILIES = (
    KSM_POD_INFO,
    KSM_POD_LABELS,
    KSM_POD_OWNER,
    KSM_POD_PHASE,
    KSM_POD_TERMINATED_REASON,
    KSM_POD_CREATED,
    KSM_POD_START_TIME,
    KSM_POD_COMPLETION_TIME,
    KSM_POD_REQUESTS,
)
POD_PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")  # kube-state-metrics' order

FAMILY_TYPES: dict[str, str] = {
    GPU_ENERGY: "counter",
    GPU_IDLE: "counter",
    GPU_POWER: "gauge",
    GPU_MEMORY: "gauge",
    GPU_RESETS: "counter",
    GPU_SAMPLED: "counter",
    GPU_POWER_LIMIT: "gauge",
    GPU_SM_CLOCK: "gauge",
    JOB_ENERGY: "counter",
    JOB_SAMPLED: "counter",
    JOB_SM: "counter",
    JOB_OCCUPANCY: "counter",
    JOB_MEMORY: "gauge",
    JOB_LAST_SEEN: "gauge",
    JOB_START: "gauge",
    JOB_INFO: "gauge",
    AGENT_INFO: "gauge",
    AGENT_SAMPLES: "counter",
    AGENT_MISSED: "counter",
    DCGM_ENERGY: "counter",
    DCGM_POWER: "gauge",
    DCGM_UTIL: "gauge",
    DCGM_FB_USED: "gauge",
    DCGM_POWER_MGMT_LIMIT: "gauge",
    DCGM_SM_CLOCK: "gauge",
    **dict.fromkeys(KSM_FAMILIES, "gauge"),
    **serving.FAMILY_TYPES,
}
HELP: dict[str, str] = {
    GPU_ENERGY: "Energy the GPU used while the agent watched (J).",
    GPU_IDLE: "Part of it in samples with no job on the GPU (J).",
    GPU_POWER: "Board power now (W).",
    GPU_MEMORY: "GPU memory used now (bytes).",
    GPU_RESETS: "Times the driver's energy counter went backwards.",
    GPU_SAMPLED: "Seconds of the GPU's time the agent sampled.",
    GPU_POWER_LIMIT: "Power limit the driver enforces now (W).",
    GPU_SM_CLOCK: "SM clock now (Hz).",
    JOB_ENERGY: "Energy given to the job on the GPU by the split method (J).",
    JOB_SAMPLED: "Seconds of the job's presence on the GPU that the agent sampled.",
    JOB_SM: "SM-busy seconds of the job on the GPU.",
    JOB_OCCUPANCY: "GPU-seconds charged to the job: each sample's length over the jobs present.",
    JOB_MEMORY: "GPU memory the job holds now (bytes).",
    JOB_LAST_SEEN: "End of the last sample that found the job on the GPU (Unix seconds).",
    JOB_START: "When the job started (Unix seconds).",
    JOB_INFO: "Job metadata.",
    AGENT_INFO: "What the agent can see on this node.",
    AGENT_SAMPLES: "Ticks done.",
    AGENT_MISSED: "Ticks missed.",
    DCGM_ENERGY: "Total energy consumption since boot (in mJ).",
    DCGM_POWER: "Power draw (in W).",
    DCGM_UTIL: "GPU utilization (in %).",
    DCGM_FB_USED: "Framebuffer memory used (in MiB).",
    DCGM_POWER_MGMT_LIMIT: "Power management limit (in W).",
    DCGM_SM_CLOCK: "SM clock frequency (in MHz).",
    KSM_POD_INFO: "Information about pod.",
    KSM_POD_LABELS: "Kubernetes labels converted to Prometheus labels.",
    KSM_POD_OWNER: "Information about the Pod's owner.",
    KSM_POD_PHASE: "The pods current phase.",
    KSM_POD_TERMINATED_REASON: "Describes the reason the container is currently in terminated state.",
    KSM_POD_CREATED: "Unix creation timestamp",
    KSM_POD_START_TIME: "Start time in unix timestamp for a pod.",
    KSM_POD_COMPLETION_TIME: "Completion time in unix timestamp for a pod.",
    KSM_POD_REQUESTS: "The number of requested request resource by a container.",
    **serving.HELP,
}


@dataclass
class Series:
    """One exposed series over a stretch of scrapes."""

    family: str
    labels: dict[str, str]
    times: np.ndarray  # Unix seconds
    values: np.ndarray


@dataclass
class JobTruth:
    """The right answer for a job, for tests and for judging an ingest."""

    job_key: str
    source: str
    energy_j: float = 0.0  # what the agent measured and Prometheus kept (agent), or the method's split (dcgm)
    energy_by_method: dict[str, float] = field(default_factory=dict)
    physical_energy_j: float = 0.0  # the job's share of every second it ran, seen or not
    sampled_s: float = 0.0
    expected_s: float = 0.0
    start: float = 0.0
    end: float = 0.0
    gpus: int = 0
    memory_bytes: int = 0
    # An inference server's final counts (apps.simulator.serving); 0 for a job that serves nothing.
    output_tokens: float = 0.0
    prompt_tokens: float = 0.0
    requests: float = 0.0
    work_units: float = 0.0  # a training job's own work counter (apps.simulator.serving)

    @property
    def coverage(self) -> float:
        return min(1.0, self.sampled_s / self.expected_s) if self.expected_s else 0.0

    @property
    def attribution(self) -> str:
        return max(self.energy_by_method.items(), key=lambda kv: kv[1])[0] if self.energy_by_method else ""


@dataclass
class GpuModel:
    """One GPU's piecewise-constant state: breakpoints and, per segment, power, presence and rates."""

    node: NodeSpec
    index: int
    uuid: str
    bps: np.ndarray  # segment boundaries, seconds since scenario start
    power_w: np.ndarray
    util: np.ndarray
    fb_bytes: np.ndarray
    present: list[list[int]]  # job indices present in each segment
    rates: dict[tuple[str, ...], np.ndarray]  # per-second rates of each agent counter, 0 while the agent is down
    cumulative: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)  # at each breakpoint
    resets: list[int] = field(default_factory=list)  # driver reloads, seconds since start
    jobs: list[int] = field(default_factory=list)  # indices of the scenario's jobs that use this GPU
    limit_w: np.ndarray = field(default_factory=lambda: np.zeros(0))  # enforced power limit, per segment
    sm_clock_mhz: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def cum_at(self, key: tuple[str, ...], x: np.ndarray) -> np.ndarray:
        return np.interp(x, self.bps, self.cumulative[key])

    def segment_of(self, x: np.ndarray) -> np.ndarray:
        """Segment of the tick that ends at x (the second [x-1, x))."""
        return np.clip(np.searchsorted(self.bps, x - 1, side="right") - 1, 0, len(self.bps) - 2)


class FleetSimulation:
    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        self.lives: dict[str, list[tuple[int, int]]] = {}
        self.gaps: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for node in scenario.nodes:
            downs = sorted(
                (f.start_s, f.end_s) for f in scenario.faults if f.kind == "agent_down" and f.node == node.hostname
            )
            self.lives[node.hostname] = _lives(scenario.duration_s, downs) if node.agent else []
            self.gaps[node.hostname] = [
                (f.start_s, f.end_s) for f in scenario.faults if f.kind == "scrape_gap" and f.node == node.hostname
            ]
        self.gpus: list[GpuModel] = [self._gpu_model(node, i) for node in scenario.nodes for i in range(node.gpus)]
        first = scenario.scrape_offset_s % scenario.scrape_interval_s
        self.scrapes = np.arange(first, scenario.duration_s, scenario.scrape_interval_s, dtype=float)

    # ---- the model of one GPU
    def _gpu_model(self, node: NodeSpec, index: int) -> GpuModel:
        sc = self.sc
        jobs = [(k, j) for k, j in enumerate(sc.jobs) if j.node == node.hostname and index in j.gpus]
        lives = self.lives[node.hostname]
        resets = sorted(
            f.start_s
            for f in sc.faults
            if f.kind == "counter_reset" and f.node == node.hostname and f.gpu in (None, index)
        )
        limits = sorted(
            (p.at_s, p.watts) for p in sc.power_limits if p.node == node.hostname and p.gpu in (None, index)
        )
        points = {0, sc.duration_s, *resets, *(at for at, _ in limits)}
        for _, j in jobs:
            points |= {j.start_s, min(j.end_s, sc.duration_s)}
            points |= {j.start_s + t for t, _ in j.sm + j.power_w if j.start_s + t < j.end_s}
        for u, d in lives:
            points |= {u, d}
        bps = np.array(sorted(p for p in points if 0 <= p <= sc.duration_s), dtype=float)
        n = len(bps) - 1
        power, util, fb, limit, clock = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        present: list[list[int]] = []
        rates: dict[tuple[str, ...], np.ndarray] = defaultdict(lambda: np.zeros(n))
        for s in range(n):
            a = bps[s]
            up = any(u <= a < d for u, d in lives)
            here = [(k, j) for k, j in jobs if j.start_s <= a < j.end_s]
            present.append([k for k, _ in here])
            sms = {k: profile_at(j.sm, a - j.start_s) for k, j in here}
            total_sm = sum(sms.values())
            if total_sm > 100:
                sms = {k: v * 100 / total_sm for k, v in sms.items()}
            draw = sum(max(0.0, profile_at(j.power_w, a - j.start_s) - sc.idle_power_w) for _, j in here)
            limit[s] = next((w for at, w in reversed(limits) if at <= a), sc.tdp_w)
            power[s] = sc.idle_power_w + min(limit[s] - sc.idle_power_w, draw)
            util[s] = min(100.0, sum(sms.values()))
            clock[s] = sc.sm_clock_mhz if util[s] > 0 else sc.idle_sm_clock_mhz
            fb[s] = sum(j.memory_bytes for _, j in here)
            rates[("dcgm",)][s] = power[s]
            for k, j in here:  # the physical truth, whatever the agent saw
                method, share = _agent_share(k, here, sms) if node.agent else _dcgm_share(k, here, sms, node)
                rates[("physical", j.job_key, method)][s] = share * power[s]
            if not up:
                continue
            rates[("gpu_energy",)][s] = power[s]
            rates[("gpu_sampled",)][s] = 1.0
            if not here:
                rates[("idle",)][s] = power[s]
            for k, j in here:
                method, share = _agent_share(k, here, sms)
                rates[("job_energy", j.job_key, method)][s] = share * power[s]
                rates[("job_sampled", j.job_key)][s] = 1.0
                rates[("job_sm", j.job_key)][s] = sms[k] / 100.0
                rates[("job_occupancy", j.job_key)][s] = 1.0 / len(here)
        model = GpuModel(
            node=node,
            index=index,
            uuid=sc.gpu_uuid(node.hostname, index),
            bps=bps,
            power_w=power,
            util=util,
            fb_bytes=fb,
            present=present,
            rates=dict(rates),
            resets=resets,
            jobs=[k for k, _ in jobs],
            limit_w=limit,
            sm_clock_mhz=clock,
        )
        widths = np.diff(bps)
        for key, rate in model.rates.items():
            model.cumulative[key] = np.concatenate([[0.0], np.cumsum(rate * widths)])
        return model

    # ---- which scrapes see what
    def _scrape_mask(self, hostname: str, times: np.ndarray) -> np.ndarray:
        mask = np.ones(len(times), dtype=bool)
        for a, b in self.gaps[hostname]:
            mask &= ~((times >= a) & (times < b))
        return mask

    def agent_series(self, gpu: GpuModel, times: np.ndarray) -> Iterator[Series]:
        """The agent's series of one GPU at the given scrape times (seconds since start)."""
        sc = self.sc
        node = gpu.node
        base = {"hostname": node.hostname, "gpu": str(gpu.index), "uuid": gpu.uuid}
        seen = self._scrape_mask(node.hostname, times)
        core_only = node.agent_contract == "core"  # an older agent: none of docs/metrics.md's extensions
        for u, d in self.lives[node.hostname]:
            sel = seen & (times >= u + 1) & (times < d)
            t = times[sel]
            if not len(t):
                continue
            ticks = np.floor(t)
            abs_t = t + sc.t0
            seg = gpu.segment_of(ticks)

            def counter(key: tuple[str, ...], x: np.ndarray = ticks, start: float = u) -> np.ndarray:
                if key not in gpu.cumulative:
                    return np.zeros(len(x))
                return gpu.cum_at(key, x) - gpu.cum_at(key, np.array([start]))[0]

            yield Series(GPU_ENERGY, base, abs_t, counter(("gpu_energy",)))
            yield Series(GPU_IDLE, base, abs_t, counter(("idle",)))
            if not core_only:
                yield Series(GPU_SAMPLED, base, abs_t, counter(("gpu_sampled",)))
            resets = np.array(gpu.resets, dtype=float)
            count = np.searchsorted(resets, ticks, side="right") - np.searchsorted(resets, u, side="right")
            yield Series(GPU_RESETS, base, abs_t, count.astype(float))
            yield Series(GPU_POWER, base, abs_t, gpu.power_w[seg])
            yield Series(GPU_MEMORY, base, abs_t, gpu.fb_bytes[seg])
            if sc.gpu_settings and not core_only:
                yield Series(GPU_POWER_LIMIT, base, abs_t, gpu.limit_w[seg])
                yield Series(GPU_SM_CLOCK, base, abs_t, gpu.sm_clock_mhz[seg] * 1e6)
            for k in gpu.jobs:
                job = sc.jobs[k]
                a, b = max(job.start_s, u), min(job.end_s, d)
                if b <= a:
                    continue
                jsel = seen & (times >= a + 1) & (times <= b + sc.linger_s) & (times < d)
                jt = times[jsel]
                if not len(jt):
                    continue
                jticks = np.floor(jt)
                jabs = jt + sc.t0
                labels = {**base, "job_key": job.job_key}
                for key in [key for key in gpu.cumulative if key[0] == "job_energy" and key[1] == job.job_key]:
                    yield Series(JOB_ENERGY, {**labels, "method": key[2]}, jabs, counter(key, jticks, a))
                yield Series(JOB_SAMPLED, labels, jabs, counter(("job_sampled", job.job_key), jticks, a))
                yield Series(JOB_SM, labels, jabs, counter(("job_sm", job.job_key), jticks, a))
                if not core_only:
                    yield Series(JOB_OCCUPANCY, labels, jabs, counter(("job_occupancy", job.job_key), jticks, a))
                yield Series(JOB_MEMORY, labels, jabs, np.where(jticks <= b, float(job.memory_bytes), 0.0))
                if not core_only:
                    yield Series(JOB_LAST_SEEN, labels, jabs, np.minimum(jticks, b) + sc.t0)
                if gpu.index == min(job.gpus):  # once per node
                    host = {"hostname": node.hostname, "job_key": job.job_key}
                    yield Series(JOB_START, host, jabs, np.full(len(jt), job.start_s + sc.t0))
                    yield Series(JOB_INFO, {**host, **_info_labels(job)}, jabs, np.ones(len(jt)))
        if gpu.index == 0:
            for u, d in self.lives[node.hostname]:
                sel = seen & (times >= u + 1) & (times < d)
                t = times[sel]
                if len(t):
                    host = {"hostname": node.hostname}
                    info = {**AGENT_INFO_LABELS, "version": OLDER_AGENT} if core_only else AGENT_INFO_LABELS
                    yield Series(AGENT_INFO, {**host, **info}, t + sc.t0, np.ones(len(t)))
                    yield Series(AGENT_SAMPLES, host, t + sc.t0, np.floor(t) - u)
                    yield Series(AGENT_MISSED, host, t + sc.t0, np.zeros(len(t)))

    def dcgm_series(self, gpu: GpuModel, times: np.ndarray) -> Iterator[Series]:
        """dcgm-exporter's series of one GPU; with pod labels, one copy per pod on the GPU."""
        sc, node = self.sc, gpu.node
        if not node.dcgm:
            return
        t = times[self._scrape_mask(node.hostname, times)]
        if not len(t):
            return
        ticks = np.floor(t)
        seg = gpu.segment_of(ticks)
        energy_j = gpu.cum_at(("dcgm",), ticks)
        boot_mj = 4.0e9 + 1.0e6 * gpu.index  # the counter runs since the driver loaded, long before
        resets = np.array(gpu.resets, dtype=float)
        last_reset = np.searchsorted(resets, ticks, side="right") - 1
        at_reset = gpu.cum_at(("dcgm",), resets)[np.maximum(last_reset, 0)] if len(resets) else np.zeros(len(ticks))
        # A driver reload restarts the counter from 0.
        energy_mj = np.where(last_reset >= 0, (energy_j - at_reset) * 1000.0, boot_mj + energy_j * 1000.0)
        base = {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "device": f"nvidia{gpu.index}",
            "modelName": sc.gpu_model,
            "Hostname": node.hostname,
            "DCGM_FI_DRIVER_VERSION": "580.159.04",
        }
        values = {
            DCGM_ENERGY: energy_mj,
            DCGM_POWER: gpu.power_w[seg],
            DCGM_UTIL: np.round(gpu.util[seg]),
            DCGM_FB_USED: np.round(gpu.fb_bytes[seg] / 1024**2),
        }
        if sc.gpu_settings:  # fields a site adds to dcgm-exporter's counters file
            values[DCGM_POWER_MGMT_LIMIT] = gpu.limit_w[seg]
            values[DCGM_SM_CLOCK] = gpu.sm_clock_mhz[seg]
        if not node.dcgm_pod_labels:
            for family, v in values.items():
                yield Series(family, base, t + sc.t0, v)
            return
        present_sets = [tuple(gpu.present[s]) for s in seg]
        nobody = np.array([not p for p in present_sets])
        if nobody.any():
            for family, v in values.items():
                yield Series(family, base, t[nobody] + sc.t0, v[nobody])
        for k in sorted({k for p in present_sets for k in p}):
            job = sc.jobs[k]
            here = np.array([k in p for p in present_sets])
            labels = {**base, "pod": job.pod or job.job_id, "namespace": job.namespace, "container": "main"}
            own = dict(values)
            if node.dcgm_pod_values == "own":
                own[DCGM_UTIL] = np.array([round(profile_at(job.sm, x - job.start_s)) for x in ticks])
                own[DCGM_FB_USED] = np.full(len(ticks), round(job.memory_bytes / 1024**2))
            for family, v in own.items():
                yield Series(family, labels, t[here] + sc.t0, v[here])

    def kube_series(self, times: np.ndarray) -> Iterator[Series]:
        """kube-state-metrics' series of the scenario's Kubernetes pods at the given scrape times, as it
        exports them (docs/schedulers.md, "Kubernetes"). A pod exists from its submit (default: a minute before
        its start) to `linger_s` after its end: Pending until its start, Running until its end, then Succeeded
        (state completed) or Failed (out_of_memory: its container OOMKilled; any other state: Error). Its
        GPU request is `gpus_requested`, else the GPUs it runs on. kube-state-metrics is taken to be scraped
        with the fleet and to export all of a pod's labels (its allow-list names them)."""
        sc = self.sc
        hosts = {n.hostname: i for i, n in enumerate(sc.nodes)}
        for k, job in enumerate(sc.jobs):
            if job.scheduler != "k8s" or not job.namespace or not job.pod:
                continue  # Kubernetes has no pod without a namespace (the demo's generator makes some)
            submit = job.submit_s if job.submit_s is not None else max(0, job.start_s - 60)
            t = times[(times >= submit) & (times < job.end_s + sc.linger_s)]
            if not len(t):
                continue
            ticks = np.floor(t)
            at, ones = t + sc.t0, np.ones(len(t))
            started, ended = ticks >= job.start_s, ticks >= job.end_s
            pod = {"namespace": job.namespace, "pod": job.pod, "uid": _pod_uid(job)}
            controller = (job.owner_kind, job.owner_name) if job.owner_kind and job.owner_name else ("<none>", "<none>")
            info = {
                **pod,
                "host_ip": f"10.0.{hosts[job.node] // 250}.{hosts[job.node] % 250 + 1}",
                "node": job.node,
                "created_by_kind": controller[0],
                "created_by_name": controller[1],
                "host_network": "false",
            }
            # The pod gets its IP when its sandbox starts: kube_pod_info's labels change there (a second series).
            if (~started).any():
                yield Series(KSM_POD_INFO, info, at[~started], ones[~started])
            if started.any():
                pod_ip = f"10.244.{k // 250}.{k % 250 + 2}"
                yield Series(KSM_POD_INFO, {**info, "pod_ip": pod_ip}, at[started], ones[started])
            labels = {_ksm_label_name(name): value for name, value in sorted(job.labels.items()) if value}
            yield Series(KSM_POD_LABELS, {**pod, **labels}, at, ones)
            controller_is = "true" if controller[0] != "<none>" else "<none>"
            owner = {"owner_kind": controller[0], "owner_name": controller[1], "owner_is_controller": controller_is}
            yield Series(KSM_POD_OWNER, {**pod, **owner}, at, ones)
            phase = np.where(ended, _terminal_phase(job), np.where(started, "Running", "Pending"))
            for name in POD_PHASES:
                yield Series(KSM_POD_PHASE, {**pod, "phase": name}, at, (phase == name).astype(float))
            yield Series(KSM_POD_CREATED, pod, at, np.full(len(t), submit + sc.t0))
            if started.any():
                yield Series(KSM_POD_START_TIME, pod, at[started], np.full(int(started.sum()), job.start_s + sc.t0))
            if ended.any():
                reason = {"container": "main", "reason": _terminated_reason(job)}
                yield Series(KSM_POD_TERMINATED_REASON, {**pod, **reason}, at[ended], ones[ended])
                yield Series(KSM_POD_COMPLETION_TIME, pod, at[ended], np.full(int(ended.sum()), job.end_s + sc.t0))
            request = {"container": "main", "node": job.node, "resource": "nvidia_com_gpu", "unit": "integer"}
            gpus = job.gpus_requested if job.gpus_requested is not None else len(job.gpus)
            yield Series(KSM_POD_REQUESTS, {**pod, **request}, at, np.full(len(t), float(gpus)))

    def series(self, times: np.ndarray | None = None) -> Iterator[Series]:
        """Every series of the fleet at the given scrape times (seconds since start; default all)."""
        times = self.scrapes if times is None else times
        for gpu in self.gpus:
            yield from self.agent_series(gpu, times)
            yield from self.dcgm_series(gpu, times)
        yield from self.kube_series(times)
        for family, labels, at, values in serving.serving_series(self.sc, times):
            yield Series(family, labels, at, values)

    # ---- the right answers
    def truth(self) -> dict[str, JobTruth]:
        sc = self.sc
        out: dict[str, JobTruth] = {}
        for job in sc.jobs:
            node = sc.node(job.node)
            out[job.job_key] = JobTruth(
                job_key=job.job_key,
                source="agent" if node.agent else "dcgm",
                start=sc.t0 + job.start_s,
                end=sc.t0 + min(job.end_s, sc.duration_s),
                gpus=len(job.gpus),
                memory_bytes=job.memory_bytes,
            )
        # What Prometheus kept of each server: its counters' last scraped values.
        for job_key, units in serving.counted_units_truth(sc, self.scrapes).items():
            out[job_key].work_units = units
        for job_key, served in serving.served_truth(sc, self.scrapes).items():
            truth = out[job_key]
            truth.output_tokens, truth.prompt_tokens, truth.requests = (
                served.output_tokens, served.prompt_tokens, served.requests,
            )  # fmt: skip
        for gpu in self.gpus:
            for key, cum in gpu.cumulative.items():
                if key[0] == "physical":
                    truth = out[key[1]]
                    truth.physical_energy_j += cum[-1]
                    if truth.source == "dcgm":
                        method = key[2]
                        truth.energy_by_method[method] = truth.energy_by_method.get(method, 0.0) + cum[-1]
                        truth.energy_j += cum[-1]
            for k in gpu.jobs:
                job = sc.jobs[k]
                truth = out[job.job_key]
                truth.expected_s += min(job.end_s, sc.duration_s) - job.start_s
                if truth.source == "dcgm":
                    truth.sampled_s += min(job.end_s, sc.duration_s) - job.start_s
            # What Prometheus kept: the last scraped value of each job counter in each agent life.
            for series in self.agent_series(gpu, self.scrapes):
                if "job_key" not in series.labels or not len(series.values):
                    continue
                truth = out[series.labels["job_key"]]
                if series.family == JOB_ENERGY:
                    m = series.labels["method"]
                    truth.energy_by_method[m] = truth.energy_by_method.get(m, 0.0) + float(series.values[-1])
                    truth.energy_j += float(series.values[-1])
                elif series.family == JOB_SAMPLED:
                    truth.sampled_s += float(series.values[-1])
        return out


OLDER_AGENT = "0.1.0"  # the version a 'core' contract node reports
AGENT_INFO_LABELS = {"version": "sim", "backend": "simulator", "process_utilization": "1", "accounting_mode": "0"}


def _info_labels(job: JobSpec) -> dict[str, str]:
    return {
        "scheduler": job.scheduler,
        "job_id": job.job_id,
        "user": job.user,
        "account": job.account,
        "namespace": job.namespace,
        "pod": job.pod,
        "name": job.name,
    }


def _pod_uid(job: JobSpec) -> str:
    """A stable, UUID-shaped pod uid, derived from the job's key."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"fleetwatt-simulator/{job.job_key}"))


def _ksm_label_name(name: str) -> str:
    """kube-state-metrics' Prometheus label for a pod label (`app.kubernetes.io/name` →
    `label_app_kubernetes_io_name`, camelCase to snake_case)."""
    return "label_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"[^a-zA-Z0-9_]", "_", name)).lower()


def _terminal_phase(job: JobSpec) -> str:
    return "Succeeded" if job.state == "completed" else "Failed"


def _terminated_reason(job: JobSpec) -> str:
    """The container's terminated reason as the kubelet writes it."""
    if job.state == "completed":
        return "Completed"
    return "OOMKilled" if job.state == "out_of_memory" else "Error"


def _agent_share(k: int, here: list[tuple[int, JobSpec]], sms: dict[int, float]) -> tuple[str, float]:
    """The agent's split of one second (DESIGN section 2)."""
    if len(here) == 1:
        return "whole_gpu", 1.0
    total_sm = sum(sms.values())
    if total_sm > 0:
        return "sm_time", sms[k] / total_sm
    total_mem = sum(j.memory_bytes for _, j in here)
    if total_mem > 0:
        return "memory", dict(here)[k].memory_bytes / total_mem
    return "memory", 1.0 / len(here)


def _dcgm_share(k: int, here: list[tuple[int, JobSpec]], sms: dict[int, float], node: NodeSpec) -> tuple[str, float]:
    """What fleetwatt can know of one second on a GPU that only dcgm-exporter reports."""
    if len(here) == 1:
        return "whole_gpu", 1.0
    total_sm = sum(sms.values())
    if node.dcgm_pod_values == "own" and total_sm > 0:
        return "sm_time", sms[k] / total_sm
    return "equal", 1.0 / len(here)


def _lives(duration_s: int, downs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The agent's process lifetimes between its outages."""
    lives, t = [], 0
    for a, b in downs:
        if a > t:
            lives.append((t, a))
        t = max(t, b)
    if t < duration_s:
        lives.append((t, duration_s))
    return lives
