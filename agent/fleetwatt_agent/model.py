"""Plain data passed between the backends, the discovery, the split and the exporters.

A backend reads the hardware once a tick and returns a :class:`TickReading`; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Methods the agent emits (DESIGN.md section 2). `equal` belongs to the app only: the agent never emits it.
Method = Literal["whole_gpu", "gpu_time", "sm_time", "sm_mem", "busy_time", "memory"]
METHODS: tuple[Method, ...] = ("whole_gpu", "gpu_time", "sm_time", "sm_mem", "busy_time", "memory")

# The per-process compute signal a backend gives on a GPU:
# "sm"   - NVML per-process SM utilisation (percent of the sample)
# "busy" - DRM fdinfo engine busy time (percent of the sample, summed over engines)
# None   - no per-process compute signal on this GPU (MIG, old driver, not permitted)
Signal = Literal["sm", "busy"]


@dataclass(frozen=True)
class GpuInfo:
    """What does not change while the agent runs."""

    index: int
    uuid: str
    name: str
    energy_counter: bool  # the driver has a cumulative energy counter
    mig: bool = False


@dataclass(frozen=True)
class ProcessReading:
    """One process the driver lists on a GPU at the end of a sample."""

    pid: int
    memory_bytes: int
    # Compute activity during the sample in percent of its length; None when the backend returned no
    # sample for this process (NVML only lists processes that ran kernels).
    activity_pct: float | None = None
    # Memory (DRAM read/write) activity during the sample in percent of its length, from the same
    # driver samples as `activity_pct`; None where the backend has no such signal (or no driver sample
    # for this process). The `sm_time` split does not use it; the power model's `sm_mem` split does.
    mem_activity_pct: float | None = None
    # The process's exact GPU time on this GPU so far, in ns, from the opt-in injection library
    # (gputime.py): a counter, None where the process keeps none. Recorded in traces.
    gpu_busy_ns: int | None = None
    # Its busiest kernels' counters on this GPU (kernel id: a hash of the name -> ns their launches ran,
    # summed), from the same file; None where it keeps none. Recorded in traces.
    gpu_kernels_ns: tuple[tuple[str, int], ...] | None = None
    # The union of its work alone, before the time it claims together with other processes on the GPU
    # is shared (gputime.SharedTime): `gpu_busy_ns` is what the split uses. Recorded for analysis.
    gpu_busy_raw_ns: int | None = None
    # Of its union, the time the library did not trace and counted at the busy share of the windows
    # around it (a launch-bound process traced in windows: gputime.GpuCounters.estimated_ns), so far, in
    # ns; 0 where every kernel was traced, None where it keeps no counter. Recorded in traces.
    gpu_busy_estimated_ns: int | None = None
    # Its busy time during the sample in percent of the sample's length, worked out by the sampler
    # from two readings of that counter; None where it is not known for this sample.
    gpu_time_pct: float | None = None
    # Of gpu_time_pct, the part counted from windows rather than traced (0 where all was traced).
    gpu_time_estimated_pct: float | None = None


@dataclass(frozen=True)
class GpuReading:
    index: int
    power_w: float | None
    memory_used_bytes: int
    processes: tuple[ProcessReading, ...]
    # Driver's cumulative energy counter in millijoules, or None when it was not read this tick
    # (unsupported, failed, or not due: the agent reads it every --energy-interval seconds).
    energy_mj: int | None = None
    signal: Signal | None = None
    # True when the backend asked for per-process activity and the driver had no sample at all
    # (NVML NOT_FOUND): "no samples since that timestamp", not a failure.
    activity_missing: bool = False
    # The driver's raw per-process utilisation samples this tick's activity came from, as returned
    # (pid, driver timestamp µs, SM %, memory %), and the timestamp they were asked for after: kept
    # in a --record trace so that the reading of the driver's samples can be studied and replayed.
    util_samples: tuple[tuple[int, int, float, float], ...] = ()
    util_since_us: int | None = None
    # The power limit the driver enforces (W) and the SM clock (MHz) at the tick; None where the driver does not
    # say (not supported) or the backend cannot ask (a trace recorded before they were).
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None


@dataclass(frozen=True)
class TickReading:
    wall: float  # Unix seconds at the tick
    mono: float  # monotonic seconds at the tick: sample lengths come from these
    gpus: tuple[GpuReading, ...]


@dataclass
class JobInfo:
    """Who a process belongs to. The same job_key on every node a job runs on."""

    job_key: str
    scheduler: str = ""  # slurm | kubernetes | container | process
    job_id: str = ""
    user: str = ""
    account: str = ""
    namespace: str = ""
    pod: str = ""
    name: str = ""
    start_time: float | None = None  # Unix seconds: the scheduler's, else the oldest process's start
    scheduler_start: bool = False  # start_time came from the scheduler (never replaced by a process's)

    def to_json(self) -> dict[str, object]:
        return {
            "job_key": self.job_key,
            "scheduler": self.scheduler,
            "job_id": self.job_id,
            "user": self.user,
            "account": self.account,
            "namespace": self.namespace,
            "pod": self.pod,
            "name": self.name,
            "start_time": self.start_time,
            "scheduler_start": self.scheduler_start,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> JobInfo:
        start = data.get("start_time")
        return cls(
            job_key=str(data["job_key"]),
            scheduler=str(data.get("scheduler", "")),
            job_id=str(data.get("job_id", "")),
            user=str(data.get("user", "")),
            account=str(data.get("account", "")),
            namespace=str(data.get("namespace", "")),
            pod=str(data.get("pod", "")),
            name=str(data.get("name", "")),
            start_time=float(start) if isinstance(start, (int, float)) else None,
            scheduler_start=bool(data.get("scheduler_start", False)),
        )


@dataclass(frozen=True)
class BackendInfo:
    """What the agent can see on this node (fleetwatt_agent_info)."""

    backend: str
    gpus: tuple[GpuInfo, ...]
    driver: str = ""
    process_utilization: str = "unsupported"  # supported | unsupported | mig | partial
    accounting_mode: str = "unsupported"  # enabled | disabled | unsupported
    extra: dict[str, str] = field(default_factory=dict)
