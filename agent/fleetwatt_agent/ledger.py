"""The agent's counters: per GPU, and per job on each GPU, with the open energy window.

Counters only ever rise, start at 0 when the agent starts (GPU) or when the job first appears on
that GPU in this agent process (job), and per-job series linger after the job leaves so that
Prometheus scrapes their final values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleetwatt_agent.energy import Commit, EnergyMeter
from fleetwatt_agent.model import GpuInfo
from fleetwatt_agent.power_model import JobSolo
from fleetwatt_agent.split import JobLoad, SampleSplit, proportional

IDLE = ("", "idle")  # window target for idle energy; jobs are (job_key, method)
Target = tuple[str, str]


@dataclass
class JobGpuLedger:
    job_key: str
    first_seen: float  # Unix seconds when this agent first saw the job on the GPU
    energy_j: dict[str, float] = field(default_factory=dict)  # method -> committed joules
    pending_j: dict[str, float] = field(default_factory=dict)  # method -> provisional, open window
    sampled_s: float = 0.0
    occupancy_s: float = 0.0
    sm_s: float = 0.0
    gpu_time_s: float = 0.0  # exact GPU time over the samples that had it (gpu_time_samples)
    gpu_time_samples: int = 0
    gpu_time_estimated_s: float = 0.0  # of gpu_time_s, counted from windows rather than traced
    memory_bytes: int = 0
    last_seen: float = 0.0  # Unix seconds: end of the last sample in which the job was present
    present: bool = True
    gone_since_mono: float | None = None
    first_sample_start: float | None = None  # Unix seconds: start of the first sample it was in
    solo: JobSolo = field(default_factory=JobSolo)  # its calibration samples alone on this GPU (sm_mem)
    solo_gpu_time: JobSolo = field(default_factory=JobSolo)  # alone, with its exact GPU time (gpu_time)

    def energy_total_j(self, include_pending: bool = True) -> float:
        total = sum(self.energy_j.values())
        return total + sum(self.pending_j.values()) if include_pending else total


@dataclass
class GpuLedger:
    info: GpuInfo
    meter: EnergyMeter = field(default_factory=EnergyMeter)
    energy_j: float = 0.0
    idle_j: float = 0.0
    sampled_s: float = 0.0
    power_w: float = 0.0
    memory_used_bytes: int = 0
    power_limit_w: float | None = None  # None: the driver does not say (not exported)
    sm_clock_mhz: float | None = None
    samples: int = 0
    last_mono: float | None = None
    last_wall: float | None = None
    jobs: dict[str, JobGpuLedger] = field(default_factory=dict)
    window: dict[Target, list[float]] = field(default_factory=dict)  # target -> [joules, seconds]
    pending_idle_j: float = 0.0
    max_residual_j: float = 0.0  # largest |jobs + idle - sample energy| seen on any sample
    prev_activity: dict[int, float] = field(default_factory=dict)
    prev_mem_activity: dict[int, float] = field(default_factory=dict)
    carried: int = 0  # consecutive samples that reused the previous activity
    # Exact GPU time: each listed process's counter at the last tick, and who was listed then.
    prev_gpu_busy_ns: dict[int, int] = field(default_factory=dict)
    prev_gpu_kernels_ns: dict[int, dict[str, int]] = field(default_factory=dict)
    prev_gpu_estimated_ns: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (raw, estimated)
    sample_kernels_ns: dict[int, dict[str, int]] = field(default_factory=dict)  # pid -> kernel -> ns, this sample
    prev_listed: frozenset[int] = frozenset()
    idle_power_w: float | None = None  # moving mean of the samples with no process (the gpu_time split's p0)
    resets: int = 0  # times the driver's energy counter went backwards

    def job(self, key: str, wall: float) -> JobGpuLedger:
        led = self.jobs.get(key)
        if led is None:
            led = self.jobs[key] = JobGpuLedger(job_key=key, first_seen=wall, last_seen=wall)
        return led

    def add_sample(
        self,
        *,
        dt_s: float,
        wall: float,
        energy_j: float,
        fractions: SampleSplit,
        loads: Mapping[str, JobLoad],
    ) -> float:
        """Account one sample: `fractions` is the split of 1 J, `energy_j` the sample's provisional energy.

        Returns the sample's invariant residual (jobs + idle - energy), which is float rounding only.
        """
        self.samples += 1
        self.sampled_s += dt_s
        n_jobs = len(loads)
        charged = 0.0
        for key, frac in fractions.shares_j.items():
            part_j = frac * energy_j
            charged += part_j
            method = fractions.method or "whole_gpu"
            slot = self.window.setdefault((key, method), [0.0, 0.0])
            slot[0] += part_j
            slot[1] += frac * dt_s
            led = self.jobs[key]
            led.pending_j[method] = led.pending_j.get(method, 0.0) + part_j
            led.energy_j.setdefault(method, 0.0)  # the series appears at 0 before its first commit
        idle_part = fractions.idle_j * energy_j
        charged += idle_part
        slot = self.window.setdefault(IDLE, [0.0, 0.0])
        slot[0] += idle_part
        slot[1] += fractions.idle_j * dt_s
        self.pending_idle_j += idle_part
        for key, load in loads.items():
            led = self.jobs[key]
            if led.first_sample_start is None:
                led.first_sample_start = wall - dt_s
            led.sampled_s += dt_s
            led.occupancy_s += dt_s / n_jobs
            led.sm_s += min(load.activity_pct / 100.0, 1.0) * dt_s
            if load.gpu_time_pct is not None:
                led.gpu_time_s += load.gpu_time_pct / 100.0 * dt_s
                led.gpu_time_samples += 1
                led.gpu_time_estimated_s += (load.gpu_time_estimated_pct or 0.0) / 100.0 * dt_s
            led.last_seen = wall
        residual = charged - energy_j
        self.max_residual_j = max(self.max_residual_j, abs(residual))
        return residual

    def commit(self, commit: Commit) -> dict[Target, float]:
        """Close the window: share the measured energy over its targets, add to the counters."""
        if commit.reset:
            self.resets += 1
        weights = {t: v[0] if commit.by == "energy" else v[1] for t, v in self.window.items()}
        parts: dict[Target, float] = {}
        if commit.total_j > 0.0 and any(w > 0.0 for w in weights.values()):
            parts = proportional(commit.total_j, {t: w for t, w in weights.items() if w > 0.0})
        elif commit.total_j > 0.0:
            parts = {IDLE: commit.total_j}  # nothing sampled carries weight: nobody to charge
        for target, part_j in parts.items():
            part_j = max(part_j, 0.0)  # counters never fall, whatever the float rounding did
            if target == IDLE:
                self.idle_j += part_j
            else:
                key, method = target
                led = self.jobs[key]
                led.energy_j[method] = led.energy_j.get(method, 0.0) + part_j
            self.energy_j += part_j
        self.window.clear()
        self.pending_idle_j = 0.0
        for led in self.jobs.values():
            led.pending_j.clear()
        return parts
