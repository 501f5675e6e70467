"""The DRM backend on fdinfo and hwmon trees built by the test: method busy_time, AMD and Intel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fleetwatt_agent.backends.drm import DrmBackend, parse_fdinfo
from fleetwatt_agent.sampler import Sampler, SamplerSettings

from .testkit import MapResolver


class Clock:
    """Stands in for the time module inside the backend."""

    def __init__(self, *ticks: float) -> None:
        self.ticks = list(ticks)

    def monotonic(self) -> float:
        return self.ticks.pop(0)

    def time(self) -> float:
        return 1_800_000_000.0


class Node:
    """A fake /sys and /proc with DRM cards and clients."""

    def __init__(self, root: Path) -> None:
        self.sys, self.proc = root / "sys", root / "proc"
        (self.sys / "class" / "drm").mkdir(parents=True)
        self.proc.mkdir()

    def card(
        self,
        n: int,
        pdev: str,
        driver: str,
        *,
        energy_uj: int | None = None,
        power_uw: int | None = None,
        vram: int | None = None,
    ) -> Path:
        dev = self.sys / "devices" / "pci0000:00" / pdev
        (dev / "hwmon" / f"hwmon{n}").mkdir(parents=True)
        drv = self.sys / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (dev / "driver").symlink_to(drv)
        (self.sys / "class" / "drm" / f"card{n}").mkdir()
        (self.sys / "class" / "drm" / f"card{n}" / "device").symlink_to(dev)
        (self.sys / "class" / "drm" / f"card{n}-DP-1").mkdir()  # a connector, not a GPU
        self.hwmon(n, pdev, energy_uj=energy_uj, power_uw=power_uw)
        if vram is not None:
            (dev / "mem_info_vram_used").write_text(f"{vram}\n")
        return dev

    def hwmon(self, n: int, pdev: str, *, energy_uj: int | None = None, power_uw: int | None = None) -> None:
        h = self.sys / "devices" / "pci0000:00" / pdev / "hwmon" / f"hwmon{n}"
        if energy_uj is not None:
            (h / "energy1_input").write_text(f"{energy_uj}\n")
        if power_uw is not None:
            (h / "power1_average").write_text(f"{power_uw}\n")

    def client(self, pid: int, fd: int, text: str, target: str = "/dev/dri/renderD128") -> None:
        (self.proc / str(pid) / "fd").mkdir(parents=True, exist_ok=True)
        (self.proc / str(pid) / "fdinfo").mkdir(parents=True, exist_ok=True)
        link = self.proc / str(pid) / "fd" / str(fd)
        if not link.is_symlink():
            link.symlink_to(target)
        (self.proc / str(pid) / "fdinfo" / str(fd)).write_text(text)


def amd(pdev: str, cid: int, gfx_ns: int, vram_kib: int, compute_ns: int = 0) -> str:
    return (
        f"pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t{pdev}\ndrm-client-id:\t{cid}\n"
        f"drm-engine-gfx:\t{gfx_ns} ns\ndrm-engine-compute:\t{compute_ns} ns\n"
        f"drm-memory-vram:\t{vram_kib} KiB\ndrm-memory-gtt:\t4096 KiB\n"
    )


def test_busy_time_split_with_the_hwmon_energy_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given an AMD card with an energy counter and two busy clients, plus one idle process holding nothing
    node = Node(tmp_path)
    pdev = "0000:03:00.0"
    node.card(0, pdev, "amdgpu", energy_uj=10_000_000, power_uw=300_000_000, vram=6 * 2**30)
    node.client(100, 5, amd(pdev, 1, 0, 1024))
    node.client(100, 6, amd(pdev, 1, 0, 1024))  # the same client behind a dup'd fd
    node.client(200, 7, amd(pdev, 2, 0, 2048))
    node.client(300, 3, amd(pdev, 3, 0, 0))  # opened the device, never used it
    node.client(400, 1, "pos: 0\nflags: 0\n", target="/dev/null")
    import fleetwatt_agent.backends.drm as drm_mod

    monkeypatch.setattr(drm_mod, "time", Clock(1000.0, 1001.0))
    backend = DrmBackend(sys_root=node.sys, proc_root=node.proc)
    info = backend.open()
    assert [(g.index, g.uuid, g.name, g.energy_counter) for g in info.gpus] == [
        (0, f"drm-{pdev}", f"amdgpu {pdev}", True)
    ]
    sampler = Sampler(
        backend,
        info,
        MapResolver({100: "slurm/1", 200: "slurm/2"}),
        SamplerSettings(hostname="n", energy_interval_s=0.0),
    )
    sampler.tick()
    # when 1 s passes: client 1 busy 0.6 s on gfx, client 2 0.1 s gfx + 0.1 s compute; 250 J used
    node.client(100, 5, amd(pdev, 1, 600_000_000, 1024))
    node.client(100, 6, amd(pdev, 1, 600_000_000, 1024))
    node.client(200, 7, amd(pdev, 2, 100_000_000, 2048, compute_ns=100_000_000))
    node.hwmon(0, pdev, energy_uj=260_000_000)
    reading = backend.read(read_energy=True)
    sampler._apply(reading)
    # then
    g = reading.gpus[0]
    assert [(p.pid, p.memory_bytes, round(p.activity_pct or 0, 6)) for p in g.processes] == [
        (100, 1024 * 1024, 60.0),
        (200, 2048 * 1024, 20.0),
    ]
    assert g.signal == "busy" and g.energy_mj == 260_000 and g.memory_used_bytes == 6 * 2**30
    jobs = sampler.gpus[0].jobs
    assert jobs["slurm/1"].energy_j == {"busy_time": pytest.approx(187.5)}
    assert jobs["slurm/2"].energy_j == {"busy_time": pytest.approx(62.5)}
    assert "proc/300-0" not in jobs


def test_power_average_only_and_intel_xe_cycles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = Node(tmp_path)
    pdev = "0000:00:02.0"
    node.card(0, pdev, "xe", power_uw=20_000_000)

    def xe(cycles: int, total: int) -> str:
        return (
            f"drm-driver: xe\ndrm-pdev: {pdev}\ndrm-client-id: 9\ndrm-cycles-rcs: {cycles}\n"
            f"drm-total-cycles-rcs: {total}\ndrm-total-vram0: 8 MiB\ndrm-resident-vram0: 4 MiB\n"
        )

    node.client(50, 4, xe(0, 1000))
    import fleetwatt_agent.backends.drm as drm_mod

    monkeypatch.setattr(drm_mod, "time", Clock(10.0, 12.0))
    backend = DrmBackend(sys_root=node.sys, proc_root=node.proc)
    info = backend.open()
    assert not info.gpus[0].energy_counter
    backend.read(read_energy=True)
    node.client(50, 4, xe(500, 3000))
    g = backend.read(read_energy=True).gpus[0]
    assert g.energy_mj is None and g.power_w == 20.0
    assert [(p.pid, p.memory_bytes, p.activity_pct) for p in g.processes] == [(50, 4 * 2**20, pytest.approx(25.0))]


def test_cards_on_different_pci_devices_are_separate_gpus(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.card(0, "0000:03:00.0", "amdgpu", power_uw=1)
    node.card(1, "0000:83:00.0", "amdgpu", power_uw=1)
    node.client(7, 3, amd("0000:83:00.0", 4, 5, 100))
    backend = DrmBackend(sys_root=node.sys, proc_root=node.proc)
    backend.open()
    reading = backend.read(read_energy=False)
    assert [len(g.processes) for g in reading.gpus] == [0, 1]


def test_no_drm_card_is_backend_unavailable(tmp_path: Path) -> None:
    from fleetwatt_agent.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="no GPU"):
        DrmBackend(sys_root=tmp_path, proc_root=tmp_path).open()


def test_parse_fdinfo_units_and_non_drm_files() -> None:
    client = parse_fdinfo(
        "drm-driver: i915\ndrm-client-id: 3\ndrm-engine-render: 10 ns\n"
        "drm-engine-capacity-video: 2\ndrm-total-local0: 2 GiB\ndrm-total-system: 1 MiB\n"
    )
    assert client is not None
    assert client.engines_ns == {"render": 10} and client.memory_bytes() == 2 * 2**30
    assert parse_fdinfo("pos: 0\nflags: 0\n") is None
    assert os.sep == "/"
