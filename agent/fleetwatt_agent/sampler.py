"""The 1 Hz loop: read the backend, resolve jobs, split each GPU's sample, keep the counters."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from fleetwatt_agent.backends.base import Backend, Resolver
from fleetwatt_agent.errors import ReplayFinished
from fleetwatt_agent.ledger import IDLE, GpuLedger, JobGpuLedger
from fleetwatt_agent.model import BackendInfo, GpuReading, JobInfo, ProcessReading, TickReading
from fleetwatt_agent.power_model import (
    JobSolo,
    PowerFit,
    PowerStats,
    calibrated_fit,
    solo_add,
    solo_add_gpu_time,
    stats_add,
)
from fleetwatt_agent.split import DEFAULT_SPLIT, GpuTimePower, JobLoad, SplitChoice, job_loads, split_sample

log = logging.getLogger(__name__)

# A process's GPU time in one sample is capped at this share of the sample: the counter is read a
# flush late, so a busy second can report a little more than a second, but never much more.
MAX_GPU_TIME_PCT = 150.0
# Weight of the newest sample in the moving mean of a GPU's idle power (about 10 samples).
IDLE_POWER_WEIGHT = 0.1
# A job never seen alone takes its kernels' power where kernels known from jobs seen alone made at least
# this share of its kernel time in the sample; the GPU model's typical power otherwise.
KNOWN_KERNELS_MIN_SHARE = 0.5
# Kernels kept per GPU model (a new one past this is not learned).
MAX_KERNELS = 20_000


class TickSink(Protocol):
    """Receives every tick (the recorder)."""

    def write_tick(self, reading: TickReading, new_jobs: dict[int, JobInfo], outputs: list[dict[str, Any]]) -> None: ...


@dataclass(frozen=True)
class SamplerSettings:
    hostname: str
    interval_s: float = 1.0
    energy_interval_s: float = 10.0
    linger_s: float = 300.0
    # A sample longer than this is a gap (agent stopped, machine hung): not counted, not charged.
    max_gap_s: float | None = None
    # Samples in a row that may reuse the previous per-process activity when the driver returned none
    # (NVML samples at about 1 Hz too, so a tick sometimes falls between two of its samples).
    activity_carry: int = 1
    # How shared samples with NVML's per-process utilisation are split (--split; split.py).
    split: SplitChoice = DEFAULT_SPLIT
    # Split shared samples by the processes' exact GPU time where they all report it (gpu_time). Off only
    # to replay a trace as an agent without it would have split it (the accuracy campaign's comparison).
    gpu_time: bool = True

    @property
    def gap_s(self) -> float:
        return self.max_gap_s if self.max_gap_s is not None else max(3.0 * self.interval_s, 3.0)


@dataclass(frozen=True)
class JobGpuView:
    gpu: GpuLedger
    led: JobGpuLedger


@dataclass
class Snapshot:
    """A consistent copy of the counters, taken under the sampler's lock, for /metrics and /jobs."""

    hostname: str
    info: BackendInfo
    started_wall: float
    samples_total: int
    missed_total: int
    gaps_total: int
    last_tick_wall: float | None
    last_tick_mono: float | None
    last_tick_real: float | None  # time.monotonic() of this process at the last tick (health)
    first_tick_wall: float | None
    interval_s: float
    errors_total: int
    tick_cpu_s: float
    done: bool
    gpus: list[GpuLedger]
    jobs: dict[str, JobInfo]
    split: SplitChoice = DEFAULT_SPLIT
    # GPU model name -> the power model's calibration statistics (power_model.py)
    power_models: dict[str, PowerStats] = field(default_factory=dict)


class Sampler:
    def __init__(
        self,
        backend: Backend,
        info: BackendInfo,
        resolver: Resolver,
        settings: SamplerSettings,
        sink: TickSink | None = None,
        power_models: Mapping[str, PowerStats] | None = None,
    ) -> None:
        self.backend = backend
        self.info = info
        self.resolver = resolver
        self.settings = settings
        self.sink = sink
        self.lock = threading.Lock()
        self.gpus: dict[int, GpuLedger] = {g.index: GpuLedger(info=g) for g in info.gpus}
        self.jobs: dict[str, JobInfo] = {}
        self.pid_job: dict[int, str] = {}
        # The power model per GPU model name, calibrated from single-job samples whatever --split says (so
        # that its state shows before it is used), and its calibrated fit (None until it is), computed when
        # a shared sample needs it after the statistics changed.
        self.power_models: dict[str, PowerStats] = dict(power_models or {})
        self._fits: dict[str, PowerFit | None] = {}
        # Per GPU model: every job's samples alone with its exact GPU time (the `gpu_time` split's figure
        # for jobs never seen alone).
        self.gpu_time_typical: dict[str, JobSolo] = {}
        # Per GPU model: each kernel's power from jobs seen alone (the parts of their samples alone), by id.
        self.gpu_time_kernels: dict[str, dict[str, JobSolo]] = {}
        self.samples_total = 0
        self.missed_total = 0
        self.gaps_total = 0
        self.started_wall = time.time()
        self.last_tick_wall: float | None = None
        self.last_tick_mono: float | None = None
        self.last_energy_mono: float | None = None
        self.last_tick_real: float | None = None
        self.first_tick_wall: float | None = None
        self.done = False
        self.errors_total = 0
        # CPU time of the sampler thread in its ticks (driver calls included), for the bench figures.
        self.tick_cpu_s = 0.0

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` is set (or the replay ends). Ticks are scheduled on a fixed grid; a tick
        that overruns skips the grid points it missed and counts them."""
        interval = self.settings.interval_s
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except ReplayFinished:
                log.info("replay finished after %d ticks", self.samples_total)
                break
            except Exception:  # a bad tick must not kill the agent; the next one may be fine
                self.errors_total += 1
                log.exception("tick failed")
            if self.backend.self_paced:
                continue
            next_at += interval
            now = time.monotonic()
            if now > next_at:
                missed = int((now - next_at) // interval) + 1
                with self.lock:
                    self.missed_total += missed
                next_at += missed * interval
            stop.wait(max(next_at - time.monotonic(), 0.0))
        with self.lock:
            self.done = True

    def tick(self) -> None:
        cpu0 = time.thread_time()
        try:
            self._tick()
        finally:
            self.tick_cpu_s += time.thread_time() - cpu0

    def _tick(self) -> None:
        now = time.monotonic()
        due = (
            self.last_energy_mono is None
            or now - self.last_energy_mono >= self.settings.energy_interval_s - 0.5 * self.settings.interval_s
            or (self.last_tick_mono is not None and now - self.last_tick_mono > self.settings.gap_s)
        )
        if due:
            self.last_energy_mono = now
        reading = self.backend.read(read_energy=due)
        with self.lock:
            new_jobs, outputs = self._apply(reading)
        if self.sink is not None:
            self.sink.write_tick(reading, new_jobs, outputs)

    # -- one tick's arithmetic ----------------------------------------------------------------------
    def _apply(self, reading: TickReading) -> tuple[dict[int, JobInfo], list[dict[str, Any]]]:
        self.samples_total += 1
        if self.first_tick_wall is None:
            self.first_tick_wall = reading.wall
        self.last_tick_real = time.monotonic()
        self.last_tick_wall = reading.wall
        self.last_tick_mono = reading.mono
        new_jobs = self._resolve_pids(reading)
        outputs: list[dict[str, Any]] = []
        for gpu_reading in reading.gpus:
            led = self.gpus.get(gpu_reading.index)
            if led is None:
                continue
            out = self._apply_gpu(led, gpu_reading, reading.wall, reading.mono)
            if out is not None:
                outputs.append(out)
        self._drop_lingering(reading.mono)
        return new_jobs, outputs

    def _resolve_pids(self, reading: TickReading) -> dict[int, JobInfo]:
        """Resolve each PID once when it appears in the driver's lists; forget it when it leaves them
        (so a reused PID is resolved afresh)."""
        listed = {p.pid for g in reading.gpus for p in g.processes}
        for pid in [p for p in self.pid_job if p not in listed]:
            del self.pid_job[pid]
        new_jobs: dict[int, JobInfo] = {}
        for pid in listed:
            if pid in self.pid_job:
                continue
            info = self.resolver.resolve(pid)
            self.pid_job[pid] = info.job_key
            new_jobs[pid] = info
            known = self.jobs.get(info.job_key)
            if known is None:
                self.jobs[info.job_key] = replace(info)
            else:
                _merge_start(known, info)
        return new_jobs

    def _apply_gpu(self, led: GpuLedger, g: GpuReading, wall: float, mono: float) -> dict[str, Any] | None:
        if g.power_w is not None:
            led.power_w = g.power_w
        led.memory_used_bytes = g.memory_used_bytes
        led.power_limit_w, led.sm_clock_mhz = g.power_limit_w, g.sm_clock_mhz
        # The same processes listed at both ends of the sample: none came or left within it.
        steady = led.prev_listed == frozenset(p.pid for p in g.processes)
        procs = self._with_gpu_time(led, self._with_activity(led, g), mono)
        loads = job_loads(procs, self.pid_job)
        for key, load in loads.items():
            job = led.job(key, wall)
            job.present = True
            job.gone_since_mono = None
            job.memory_bytes = load.memory_bytes
        for key, job in led.jobs.items():
            if key not in loads and job.present:
                job.present = False
                job.gone_since_mono = mono
                job.memory_bytes = 0

        meter = led.meter
        if led.last_mono is None:  # first reading: a baseline, no sample yet
            led.last_mono, led.last_wall = mono, wall
            if g.energy_mj is not None:
                meter.counter_read(g.energy_mj)
            return None
        dt = mono - led.last_mono
        led.last_mono, led.last_wall = mono, wall
        if dt <= 0.0:
            return None
        out: dict[str, Any] = {"index": g.index, "dt_s": round(dt, 6)}
        if dt > self.settings.gap_s:
            self.gaps_total += 1
            commit = meter.abandon(g.energy_mj if led.info.energy_counter else None)
            out["gap"] = True
        else:
            energy_j = meter.add_sample(dt, g.power_w)
            model = self._fit(led.info.name) if self.settings.split == "sm_mem" and len(loads) > 1 else None
            solo = {k: led.jobs[k].solo for k in loads} if model is not None else None
            gpu_power = self._gpu_time_power(led, loads) if len(loads) > 1 else None
            fractions = split_sample(1.0, loads, g.signal, model, power_w=energy_j / dt, solo=solo, gpu_power=gpu_power)
            if g.signal == "sm":
                self._calibrate(led, g, loads)
            self._learn_gpu_time_power(led, loads, power_w=energy_j / dt, listed=bool(g.processes), steady=steady)
            residual = led.add_sample(dt_s=dt, wall=wall, energy_j=energy_j, fractions=fractions, loads=loads)
            out["sample_j"] = energy_j
            out["idle_j"] = fractions.idle_j * energy_j
            out["jobs"] = {k: [fractions.method, f * energy_j] for k, f in fractions.shares_j.items()}
            out["residual_j"] = residual
            if not led.info.energy_counter:
                commit = meter.no_counter()
            elif g.energy_mj is not None:
                commit = meter.counter_read(g.energy_mj)
            else:
                commit = None
        if commit is not None:
            parts = led.commit(commit)
            out["commit"] = {
                "total_j": commit.total_j,
                "by": commit.by,
                "reset": commit.reset,
                "idle_j": parts.get(IDLE, 0.0),
            }
        return out

    def _with_activity(self, led: GpuLedger, g: GpuReading) -> tuple[ProcessReading, ...]:
        if g.signal is None:
            return g.processes
        if g.activity_missing and g.processes and led.prev_activity and led.carried < self.settings.activity_carry:
            led.carried += 1
            prev, prev_mem = led.prev_activity, led.prev_mem_activity
            return tuple(
                replace(
                    p,
                    activity_pct=prev.get(p.pid, 0.0),
                    mem_activity_pct=prev_mem.get(p.pid, 0.0) if prev_mem else p.mem_activity_pct,
                )
                for p in g.processes
            )
        led.carried = 0
        led.prev_activity = {
            p.pid: p.activity_pct for p in g.processes if p.activity_pct is not None and p.activity_pct > 0
        }
        led.prev_mem_activity = {p.pid: p.mem_activity_pct for p in g.processes if p.mem_activity_pct is not None}
        return g.processes

    def _with_gpu_time(
        self, led: GpuLedger, procs: tuple[ProcessReading, ...], mono: float
    ) -> tuple[ProcessReading, ...]:
        """Each process's GPU time in this sample from two readings of its counter (gputime.py).

        A process first listed in this sample started its counter at 0 within it, so the whole counter
        is this sample's; one listed before without a counter, or whose counter went back, starts a
        baseline here (unknown for this sample). Before the GPU's first sample nothing is known."""
        listed = frozenset(p.pid for p in procs)
        previous, was_listed = led.prev_gpu_busy_ns, led.prev_listed
        prev_kernels, prev_estimated = led.prev_gpu_kernels_ns, led.prev_gpu_estimated_ns
        led.prev_gpu_estimated_ns = {
            p.pid: (p.gpu_busy_raw_ns, p.gpu_busy_estimated_ns)
            for p in procs
            if p.gpu_busy_raw_ns is not None and p.gpu_busy_estimated_ns is not None
        }
        led.prev_gpu_busy_ns = {p.pid: p.gpu_busy_ns for p in procs if p.gpu_busy_ns is not None}
        led.prev_gpu_kernels_ns = {p.pid: dict(p.gpu_kernels_ns) for p in procs if p.gpu_kernels_ns}
        led.prev_listed = listed
        led.sample_kernels_ns = {}
        if led.last_mono is None or not led.prev_gpu_busy_ns or not self.settings.gpu_time:
            return procs
        dt = mono - led.last_mono
        if dt <= 0.0:
            return procs
        out = []
        for p in procs:
            busy = p.gpu_busy_ns
            before = previous.get(p.pid, None if p.pid in was_listed else 0)
            if busy is None or before is None or busy < before:
                out.append(p)
                continue
            pct = min((busy - before) / 1e9 / dt * 100.0, MAX_GPU_TIME_PCT)
            out.append(replace(p, gpu_time_pct=pct, gpu_time_estimated_pct=pct * _estimated_part(p, prev_estimated)))
            if p.gpu_kernels_ns:
                led.sample_kernels_ns[p.pid] = kernel_deltas(
                    dict(p.gpu_kernels_ns), prev_kernels.get(p.pid, {}), new=p.pid not in was_listed, dt_s=dt
                )
        return tuple(out)

    def _gpu_time_power(self, led: GpuLedger, loads: Mapping[str, JobLoad]) -> GpuTimePower | None:
        """What the `gpu_time` split needs, when every job present has its GPU time in this sample."""
        if any(load.gpu_time_pct is None for load in loads.values()):
            return None
        p0 = led.idle_power_w
        if p0 is None:
            fit = calibrated_fit(self.power_models.get(led.info.name))
            p0 = fit.p0_w if fit is not None else None
        base = p0 or 0.0
        own = {}
        kernels = self.gpu_time_kernels.get(led.info.name, {})
        for key, load in loads.items():
            w = led.jobs[key].solo_gpu_time.dynamic_w_per_sm_pct(base)
            if w is None and kernels:
                w = _from_kernels(self._job_kernels(led, load), kernels, base)
            if w is not None:
                own[key] = w
        typical = self.gpu_time_typical.get(led.info.name)
        return GpuTimePower(
            p0_w=p0,
            own_w_per_pct=own,
            typical_w_per_pct=typical.dynamic_w_per_sm_pct(base) if typical is not None else None,
        )

    def _learn_gpu_time_power(
        self, led: GpuLedger, loads: Mapping[str, JobLoad], *, power_w: float, listed: bool, steady: bool
    ) -> None:
        """The GPU's idle power from samples with no process on it; a job's own power per point of GPU
        time from the samples where it had the GPU to itself and reported its GPU time.

        A job had the GPU to itself only in a `steady` sample, with the same processes listed at both of
        its ends: the driver lists processes at a sample's end, so in the sample in which a job's partner
        left, the GPU drew the two jobs' power together for part of it, and the job left alone may count
        time the two claimed together (before SharedTime kept a leaving process's claims, up to 143 % of
        the sample in the H100 runs of docs/accuracy.md). Taught as that job's power alone, such a sample
        made it, and every kernel it runs, look cheaper."""
        if not listed:
            prev = led.idle_power_w
            led.idle_power_w = power_w if prev is None else prev + IDLE_POWER_WEIGHT * (power_w - prev)
            return
        if len(loads) != 1 or not steady:
            return
        ((key, load),) = loads.items()
        if load.gpu_time_pct is None:
            return
        job = led.jobs[key]
        job.solo_gpu_time = solo_add_gpu_time(job.solo_gpu_time, gpu_time_pct=load.gpu_time_pct, power_w=power_w)
        name = led.info.name
        self.gpu_time_typical[name] = solo_add_gpu_time(
            self.gpu_time_typical.get(name, JobSolo()), gpu_time_pct=load.gpu_time_pct, power_w=power_w
        )
        ran = self._job_kernels(led, load)
        total = math.fsum(ran.values())
        if total <= 0.0 or load.gpu_time_pct <= 0.0:
            return
        table = self.gpu_time_kernels.setdefault(name, {})
        for kernel, ns in ran.items():
            if kernel in table or len(table) < MAX_KERNELS:
                table[kernel] = solo_add_gpu_time(
                    table.get(kernel, JobSolo()), gpu_time_pct=load.gpu_time_pct, power_w=power_w, weight=ns / total
                )

    @staticmethod
    def _job_kernels(led: GpuLedger, load: JobLoad) -> dict[str, float]:
        """The job's kernels' time in this sample, ns, summed over its processes."""
        out: dict[str, float] = {}
        for pid in load.pids:
            for kernel, ns in led.sample_kernels_ns.get(pid, {}).items():
                out[kernel] = out.get(kernel, 0.0) + ns
        return out

    def _calibrate(self, led: GpuLedger, g: GpuReading, loads: Mapping[str, JobLoad]) -> None:
        """Feed the GPU model's power model with this sample if it is a calibration sample: exactly one job
        on the GPU, the driver's own utilisation for it (not NOT_FOUND, not carried from the sample
        before, memory activity included), and a power reading of its own. Samples with no process are
        not used: without a context the GPU may sit in a lower power state than p0 describes."""
        name = led.info.name
        stats = self.power_models.setdefault(name, PowerStats())  # the model shows from its first sample
        if len(loads) != 1 or g.activity_missing or led.carried or g.power_w is None:
            return
        (load,) = loads.values()
        if load.mem_activity_pct is None:
            return
        stats = stats_add(stats, sm_pct=load.activity_pct, mem_pct=load.mem_activity_pct, power_w=g.power_w)
        self.power_models[name] = stats
        self._fits.pop(name, None)
        (key,) = loads
        job = led.jobs[key]
        job.solo = solo_add(job.solo, sm_pct=load.activity_pct, power_w=g.power_w)

    def _fit(self, name: str) -> PowerFit | None:
        if name not in self._fits:
            self._fits[name] = calibrated_fit(self.power_models.get(name))
        return self._fits[name]

    def power_state(self) -> dict[str, PowerStats]:
        """A copy of the power models' statistics (to save them: --power-model-file)."""
        with self.lock:
            return dict(self.power_models)

    def _drop_lingering(self, mono: float) -> None:
        linger = self.settings.linger_s
        for led in self.gpus.values():
            for key in [
                k
                for k, j in led.jobs.items()
                if not j.present
                and j.gone_since_mono is not None
                and mono - j.gone_since_mono >= linger
                and not j.pending_j  # its share of the open window is not committed yet
            ]:
                del led.jobs[key]
        alive = {k for led in self.gpus.values() for k in led.jobs}
        alive.update(self.pid_job.values())
        for key in [k for k in self.jobs if k not in alive]:
            del self.jobs[key]

    # -- reading the counters -------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            gpus = []
            for led in self.gpus.values():
                copy = replace(
                    led,
                    jobs={
                        k: replace(j, energy_j=dict(j.energy_j), pending_j=dict(j.pending_j))
                        for k, j in led.jobs.items()
                    },
                    window={t: list(v) for t, v in led.window.items()},
                    prev_activity={},
                    prev_mem_activity={},
                    prev_gpu_busy_ns={},
                    prev_gpu_kernels_ns={},
                    sample_kernels_ns={},
                )
                gpus.append(copy)
            return Snapshot(
                hostname=self.settings.hostname,
                info=self.info,
                started_wall=self.started_wall,
                samples_total=self.samples_total,
                missed_total=self.missed_total,
                gaps_total=self.gaps_total,
                last_tick_wall=self.last_tick_wall,
                last_tick_mono=self.last_tick_mono,
                last_tick_real=self.last_tick_real,
                first_tick_wall=self.first_tick_wall,
                interval_s=self.settings.interval_s,
                errors_total=self.errors_total,
                tick_cpu_s=self.tick_cpu_s,
                done=self.done,
                gpus=gpus,
                jobs={k: replace(v) for k, v in self.jobs.items()},
                split=self.settings.split,
                power_models=dict(self.power_models),
            )


def kernel_deltas(now: dict[str, int], before: dict[str, int], *, new: bool, dt_s: float) -> dict[str, int]:
    """Each kernel's time in the sample from two readings of a process's busiest kernels. A kernel
    listed before: the difference (none if it went back). One not listed before ran for the first time,
    or rose among the busiest: its counter counts if the process is new, or if it fits in the sample."""
    out: dict[str, int] = {}
    for kernel, ns in now.items():
        prev = before.get(kernel)
        if prev is not None:
            if ns > prev:
                out[kernel] = ns - prev
        elif ns > 0 and (new or ns <= dt_s * 1e9 * MAX_GPU_TIME_PCT / 100.0):
            out[kernel] = ns
    return out


def _from_kernels(ran: dict[str, float], table: dict[str, JobSolo], p0_w: float) -> float | None:
    """A job's energy per point of GPU time from the kernels it ran in the sample, where kernels known
    from jobs seen alone make enough of its kernel time; None otherwise."""
    total = math.fsum(ran.values())
    if total <= 0.0:
        return None
    known = {}
    for kernel, ns in ran.items():
        kp = table.get(kernel)
        w = kp.dynamic_w_per_sm_pct(p0_w) if kp is not None else None
        if w is not None:
            known[kernel] = (ns, w)
    share = math.fsum(ns for ns, _ in known.values()) / total
    if share < KNOWN_KERNELS_MIN_SHARE:
        return None
    return math.fsum(ns * w for ns, w in known.values()) / math.fsum(ns for ns, _ in known.values())


def _merge_start(known: JobInfo, new: JobInfo) -> None:
    """A job's start: the scheduler's when known, else the oldest of its processes' starts."""
    if known.scheduler_start:
        return
    if new.scheduler_start:
        known.start_time, known.scheduler_start = new.start_time, True
    elif new.start_time is not None and (known.start_time is None or new.start_time < known.start_time):
        known.start_time = new.start_time


def _estimated_part(p: ProcessReading, before: Mapping[int, tuple[int, int]]) -> float:
    """Of a process's rise of its union counter since the last sample, the part the library counted from
    its windows rather than traced (0 where it traced every kernel, or keeps no such counter)."""
    if p.gpu_busy_raw_ns is None or p.gpu_busy_estimated_ns is None:
        return 0.0
    raw0, est0 = before.get(p.pid, (0, 0))
    rise, est_rise = p.gpu_busy_raw_ns - raw0, p.gpu_busy_estimated_ns - est0
    if rise <= 0 or est_rise <= 0:
        return 0.0
    return min(est_rise / rise, 1.0)
