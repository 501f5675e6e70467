"""AMD and Intel GPUs through the kernel's DRM client statistics and hwmon. Reads only.

Presence and activity: /proc/<pid>/fdinfo/<fd> of every open DRM file (Documentation/gpu/
drm-usage-stats.rst): `drm-pdev` says which GPU, `drm-client-id` which client (one client may sit
behind several fds), `drm-engine-<engine>: <ns> ns` its cumulative busy time per engine (amdgpu, i915),
or `drm-cycles-<engine>` / `drm-total-cycles-<engine>` (xe), and `drm-resident-|drm-memory-|drm-total-
<region>` its memory. A process is on the GPU when one of its clients holds memory or has used an
engine; its activity in a sample is its busy time summed over engines, in percent of the sample.

Energy: hwmon `energy1_input` (microjoules, cumulative) where the driver has it, else
`power1_average` / `power1_input` (microwatts) integrated by the agent.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleetwatt_agent.errors import BackendUnavailable
from fleetwatt_agent.model import BackendInfo, GpuInfo, GpuReading, ProcessReading, TickReading

log = logging.getLogger(__name__)

_CARD = re.compile(r"^card(\d+)$")
_UNITS = {"": 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_HOST_REGIONS = {"system", "gtt", "cpu", "stolen-system"}


@dataclass
class DrmClient:
    """One DRM client as its fdinfo shows it."""

    pdev: str
    client_id: str
    engines_ns: dict[str, int] = field(default_factory=dict)
    cycles: dict[str, int] = field(default_factory=dict)
    total_cycles: dict[str, int] = field(default_factory=dict)
    memory: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> region -> bytes

    def memory_bytes(self) -> int:
        for kind in ("resident", "memory", "total"):
            regions = self.memory.get(kind)
            if regions:
                device = {r: b for r, b in regions.items() if r not in _HOST_REGIONS}
                return sum((device or regions).values())
        return 0

    def used(self) -> bool:
        return self.memory_bytes() > 0 or any(self.engines_ns.values()) or any(self.cycles.values())


def parse_fdinfo(text: str) -> DrmClient | None:
    """A DRM client from one fdinfo file, or None when the file is not a DRM client."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    if "drm-driver" not in values or "drm-client-id" not in values:
        return None
    client = DrmClient(pdev=values.get("drm-pdev", ""), client_id=values["drm-client-id"])
    for key, value in values.items():
        number, _, unit = value.partition(" ")
        if not number.isdigit():
            continue
        if key.startswith("drm-engine-") and not key.startswith("drm-engine-capacity-"):
            client.engines_ns[key[len("drm-engine-") :]] = int(number)
        elif key.startswith("drm-total-cycles-"):
            client.total_cycles[key[len("drm-total-cycles-") :]] = int(number)
        elif key.startswith("drm-cycles-"):
            client.cycles[key[len("drm-cycles-") :]] = int(number)
        else:
            for kind in ("resident", "memory", "total"):
                prefix = f"drm-{kind}-"
                if key.startswith(prefix):
                    client.memory.setdefault(kind, {})[key[len(prefix) :]] = int(number) * _UNITS.get(unit, 1)
    return client


@dataclass
class _Card:
    info: GpuInfo
    pdev: str
    hwmon: Path | None
    device: Path


class DrmBackend:
    name = "drm"
    self_paced = False

    def __init__(
        self,
        sys_root: str | os.PathLike[str] = "/sys",
        proc_root: str | os.PathLike[str] = "/proc",
        rescan_s: float = 10.0,
    ) -> None:
        self.sys = Path(sys_root)
        self.proc = Path(proc_root)
        self.rescan_s = rescan_s
        self._cards: list[_Card] = []
        self._prev: dict[tuple[str, str], tuple[int, DrmClient]] = {}  # (pdev, client id) -> (pid, client)
        self._prev_mono: float | None = None
        self._drm_pids: set[int] = set()
        self._all_pids: set[int] = set()
        self._last_full = -1e9

    def open(self) -> BackendInfo:
        root = self.sys / "class" / "drm"
        names = (
            sorted((p for p in root.glob("card*") if _CARD.match(p.name)), key=lambda p: int(p.name[4:]))
            if root.is_dir()
            else []
        )
        for index, card in enumerate(names):
            device = card / "device"
            pdev = device.resolve().name
            driver = (device / "driver").resolve().name if (device / "driver").exists() else ""
            hwmons = sorted((device / "hwmon").glob("hwmon*")) if (device / "hwmon").is_dir() else []
            hwmon = hwmons[0] if hwmons else None
            energy = hwmon is not None and (hwmon / "energy1_input").exists()
            uuid = _read(device / "unique_id") or f"drm-{pdev}"
            self._cards.append(
                _Card(
                    GpuInfo(index=index, uuid=uuid, name=f"{driver} {pdev}".strip(), energy_counter=energy),
                    pdev,
                    hwmon,
                    device,
                )
            )
        if not self._cards:
            raise BackendUnavailable(f"DRM backend unavailable: no GPU under {root}")
        return BackendInfo(
            backend=self.name,
            gpus=tuple(c.info for c in self._cards),
            driver="drm",
            process_utilization="supported",
            accounting_mode="unsupported",
        )

    def resolver(self) -> None:
        return None

    def close(self) -> None:
        pass

    # -- /proc scan ----------------------------------------------------------------------------------
    def _pids(self) -> set[int]:
        try:
            return {int(n) for n in os.listdir(self.proc) if n.isdigit()}
        except OSError:
            return set()

    def _clients_of(self, pid: int) -> list[DrmClient]:
        fd_dir = self.proc / str(pid) / "fd"
        clients = []
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            return []
        for fd in fds:
            try:
                if not os.readlink(fd_dir / fd).startswith("/dev/dri/"):
                    continue
                text = (self.proc / str(pid) / "fdinfo" / fd).read_text()
            except OSError:
                continue
            client = parse_fdinfo(text)
            if client is not None:
                clients.append(client)
        return clients

    def scan(self, mono: float) -> dict[tuple[str, str], tuple[int, DrmClient]]:
        """Every DRM client, once, with its owner PID. Processes without DRM files are re-examined every
        rescan_s seconds (and new PIDs at once), so the scan stays cheap on a busy node."""
        pids = self._pids()
        full = mono - self._last_full >= self.rescan_s
        if full:
            self._last_full = mono
        todo = pids if full else (self._drm_pids & pids) | (pids - self._all_pids)
        self._all_pids = pids
        found: dict[tuple[str, str], tuple[int, DrmClient]] = {}
        drm_pids = set() if full else self._drm_pids & pids
        for pid in sorted(todo):
            clients = self._clients_of(pid)
            if clients:
                drm_pids.add(pid)
            for client in clients:
                found.setdefault((client.pdev, client.client_id), (pid, client))  # dup'd fds: one client
        self._drm_pids = drm_pids
        return found

    # -- the tick -------------------------------------------------------------------------------------
    def read(self, *, read_energy: bool) -> TickReading:
        wall, mono = time.time(), time.monotonic()
        clients = self.scan(mono)
        dt = mono - self._prev_mono if self._prev_mono is not None else 0.0
        readings = []
        for card in self._cards:
            procs: dict[int, list[float]] = {}  # pid -> [memory bytes, busy seconds]
            for (pdev, cid), (pid, client) in clients.items():
                if pdev != card.pdev or not client.used():
                    continue
                entry = procs.setdefault(pid, [0.0, 0.0])
                entry[0] += client.memory_bytes()
                entry[1] += self._busy_s(self._prev.get((pdev, cid)), pid, client, dt)
            power_w = self._power_w(card)
            energy_mj = None
            if read_energy and card.info.energy_counter and card.hwmon is not None:
                uj = _read(card.hwmon / "energy1_input")
                energy_mj = int(uj) // 1000 if uj and uj.isdigit() else None
            vram = _read(card.device / "mem_info_vram_used")
            memory_used = int(vram) if vram and vram.isdigit() else int(sum(p[0] for p in procs.values()))
            readings.append(
                GpuReading(
                    index=card.info.index,
                    power_w=power_w,
                    memory_used_bytes=memory_used,
                    processes=tuple(
                        ProcessReading(pid, int(mem), (100.0 * busy / dt) if dt > 0 else None)
                        for pid, (mem, busy) in sorted(procs.items())
                    ),
                    energy_mj=energy_mj,
                    signal="busy",
                )
            )
        self._prev = clients
        self._prev_mono = mono
        return TickReading(wall=wall, mono=mono, gpus=tuple(readings))

    @staticmethod
    def _busy_s(prev: tuple[int, DrmClient] | None, pid: int, client: DrmClient, dt: float) -> float:
        """Engine-busy seconds of a client since the last tick, summed over engines (0 on first sight)."""
        if prev is None or prev[0] != pid or dt <= 0:
            return 0.0
        before = prev[1]
        busy = sum(max(ns - before.engines_ns.get(e, ns), 0) for e, ns in client.engines_ns.items()) / 1e9
        for engine, cycles in client.cycles.items():
            d_total = client.total_cycles.get(engine, 0) - before.total_cycles.get(engine, 0)
            d_cycles = cycles - before.cycles.get(engine, cycles)
            if d_total > 0 and d_cycles > 0:
                busy += dt * min(d_cycles / d_total, 1.0)
        return busy

    @staticmethod
    def _power_w(card: _Card) -> float | None:
        if card.hwmon is None:
            return None
        for name in ("power1_average", "power1_input"):
            value = _read(card.hwmon / name)
            if value and value.isdigit():
                return int(value) / 1e6
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
