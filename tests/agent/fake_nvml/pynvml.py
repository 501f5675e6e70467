"""A fake `pynvml` for the agent's tests: the calls the NVML backend makes, over a scripted GPU.

In-process tests set `GPUS` directly. A subprocess (the two-jobs script's dry run) gets this module
first on PYTHONPATH and a JSON file in FAKE_NVML_STATE that it re-reads on every tick:
{"gpus": [{"power_w": 700, "procs": {"<pid>": {"mem": bytes, "sm": percent, "memutil": percent}}}]};
the energy counter is then integrated from that power over real time.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_CLOCK_SM = 1


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"fake NVML error {value}")
        self.value = value


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int | None  # pynvml's name


@dataclass
class UtilSample:
    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int = 0
    encUtil: int = 0
    decUtil: int = 0


@dataclass
class Memory:
    total: int
    used: int
    free: int


@dataclass
class FakeGpu:
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    name: str = "Fake H200"
    energy_mj: int = 1_000_000
    power_mw: int = 100_000
    power_limit_mw: int | None = 700_000  # None: not supported
    sm_clock_mhz: int | None = 1980  # None: not supported
    memory_total: int = 141 * 2**30
    procs: dict[int, int | None] = field(default_factory=dict)  # pid -> memory bytes
    sm: dict[int, int] = field(default_factory=dict)  # pid -> SM %; absent: no sample this tick
    mem_util: dict[int, int] = field(default_factory=dict)  # pid -> memory activity %, beside its SM %
    energy_supported: bool = True
    util_supported: bool = True
    accounting: bool = False
    mig: bool = False
    mig_procs: dict[int, dict[int, int]] = field(default_factory=dict)  # instance -> pid -> memory
    finished: dict[int, Any] = field(default_factory=dict)  # accounting records of exited processes
    lost: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    last_energy_time: float = field(default_factory=time.monotonic)


GPUS: list[FakeGpu] = []
INIT_ERROR: int | None = None
DRIVER = "999.99.99"
_CONTROL = os.environ.get("FAKE_NVML_STATE")


def reset(n: int = 1) -> list[FakeGpu]:
    global INIT_ERROR
    INIT_ERROR = None
    GPUS[:] = [FakeGpu(uuid=f"GPU-fake-{i:04d}") for i in range(n)]
    return GPUS


def _gpu(handle: Any) -> FakeGpu:
    gpu = GPUS[handle[1] if isinstance(handle, tuple) else handle]
    gpu.calls[_caller()] = gpu.calls.get(_caller(), 0) + 1
    if gpu.lost:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return gpu


def _caller() -> str:
    import sys

    return sys._getframe(2).f_code.co_name


def _sync_control() -> None:
    """Subprocess mode: follow the control file, integrate energy from its power."""
    if not _CONTROL:
        return
    try:
        with open(_CONTROL) as f:
            state: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        return
    now = time.time()
    for gpu, spec in zip(GPUS, state.get("gpus", []), strict=False):
        # Energy is a function of wall time over the control file's power history, so that every
        # process using this fake reads the same counter.
        history = spec.get("history") or [[now, spec.get("power_w", 100)]]
        joules = 0.0
        for (t0, p0), (t1, _) in zip(history, [*history[1:], [now, 0]], strict=True):
            joules += float(p0) * max(min(t1, now) - t0, 0.0)
        gpu.energy_mj = 1_000_000 + int(joules * 1000)
        gpu.power_mw = int(float(spec.get("power_w", 100)) * 1000)
        gpu.procs = {int(pid): int(p.get("mem", 0)) for pid, p in spec.get("procs", {}).items()}
        gpu.sm = {int(pid): int(p["sm"]) for pid, p in spec.get("procs", {}).items() if p.get("sm")}
        gpu.mem_util = {int(pid): int(p.get("memutil", 0)) for pid, p in spec.get("procs", {}).items()}


def nvmlInit() -> None:  # pynvml's names follow
    if INIT_ERROR is not None:
        raise NVMLError(INIT_ERROR)
    if _CONTROL and not GPUS:
        reset(1)


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    return DRIVER


def nvmlDeviceGetCount() -> int:
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def nvmlDeviceGetUUID(h: int) -> str:
    return _gpu(h).uuid


def nvmlDeviceGetName(h: int) -> str:
    return _gpu(h).name


def nvmlDeviceGetTotalEnergyConsumption(h: int) -> int:
    gpu = _gpu(h)
    if not gpu.energy_supported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if _CONTROL:
        _sync_control()
    return gpu.energy_mj


def nvmlDeviceGetPowerUsage(h: int) -> int:
    if _CONTROL:
        _sync_control()
    return _gpu(h).power_mw


def nvmlDeviceGetEnforcedPowerLimit(h: int) -> int:
    gpu = _gpu(h)
    if gpu.power_limit_mw is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.power_limit_mw


def nvmlDeviceGetClockInfo(h: int, clock_type: int) -> int:
    gpu = _gpu(h)
    if clock_type != NVML_CLOCK_SM or gpu.sm_clock_mhz is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.sm_clock_mhz


def nvmlDeviceGetMemoryInfo(h: int) -> Memory:
    gpu = _gpu(h)
    used = sum(m or 0 for m in gpu.procs.values()) + 500 * 2**20
    return Memory(gpu.memory_total, used, gpu.memory_total - used)


def nvmlDeviceGetComputeRunningProcesses(h: Any) -> list[Proc]:
    if _CONTROL:
        _sync_control()
    if isinstance(h, tuple):  # a MIG instance
        return [Proc(pid, mem) for pid, mem in _gpu(h).mig_procs.get(h[2], {}).items()]
    return [Proc(pid, mem) for pid, mem in _gpu(h).procs.items()]


def nvmlDeviceGetMaxMigDeviceCount(h: int) -> int:
    return 7 if _gpu(h).mig else 0


def nvmlDeviceGetMigDeviceHandleByIndex(h: int, i: int) -> tuple[str, int, int]:
    if i not in _gpu(h).mig_procs:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return ("mig", h, i)


def nvmlDeviceGetGraphicsRunningProcesses(h: int) -> list[Proc]:
    _gpu(h)
    return []


def nvmlDeviceGetProcessUtilization(h: int, last_seen: int) -> list[UtilSample]:
    gpu = _gpu(h)
    if not gpu.util_supported or gpu.mig:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    now = max(int(time.time() * 1e6), last_seen + 1)  # a sample newer than the caller's last one
    samples = [UtilSample(pid, now, util, gpu.mem_util.get(pid, 0)) for pid, util in gpu.sm.items() if util > 0]
    if not samples:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return samples


def nvmlDeviceGetAccountingMode(h: int) -> int:
    return 1 if _gpu(h).accounting else 0


def nvmlDeviceGetMigMode(h: int) -> list[int]:
    gpu = _gpu(h)
    return [1, 1] if gpu.mig else [0, 0]


def nvmlDeviceGetAccountingPids(h: int) -> list[int]:
    gpu = _gpu(h)
    return list(gpu.procs) + list(gpu.finished)


@dataclass
class AccountingStats:
    gpuUtilization: int
    memoryUtilization: int
    maxMemoryUsage: int
    time: int  # ms
    startTime: int  # us since the epoch
    isRunning: int


def nvmlDeviceGetAccountingStats(h: int, pid: int) -> Any:
    gpu = _gpu(h)
    if pid in gpu.finished:
        return gpu.finished[pid]
    if pid in gpu.procs:
        return AccountingStats(50, 10, gpu.procs[pid] or 0, 1000, int(time.time() * 1e6), 1)
    raise NVMLError(NVML_ERROR_NOT_FOUND)
