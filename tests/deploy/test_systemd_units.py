"""deploy/systemd: the units of a bare-metal install (web, a templated worker, beat), checked by
`systemd-analyze verify` where systemd is installed, and for what docs/deploy.md promises of them: the
settings from /etc/fleetwatt/env, a user of their own, the hardening options, the commands of the app."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
INSTALL_DIR = "/opt/fleetwatt"  # where docs/deploy.md puts the checkout and its .venv
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
}


def parse(path: Path) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values, in order (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not a key=value line: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def service(name: str) -> dict[str, str]:
    """The [Service] section of a unit, one value per key (the units set none twice)."""
    units = parse(UNITS / name)
    assert set(units) == {"Unit", "Service", "Install"}, name
    assert units["Install"]["WantedBy"] == ["multi-user.target"], name
    values = units["Service"]
    assert all(len(v) == 1 for v in values.values()), name
    return {k: v[0] for k, v in values.items()}


UNIT_NAMES = ("fleetwatt-web.service", "fleetwatt-worker@.service", "fleetwatt-beat.service")


def test_the_units_are_there() -> None:
    assert sorted(p.name for p in UNITS.glob("*.service")) == sorted(UNIT_NAMES)


@pytest.mark.parametrize("name", UNIT_NAMES)
def test_each_unit_runs_the_app_confined_with_the_settings_file(name: str) -> None:
    s = service(name)
    assert s["EnvironmentFile"] == "/etc/fleetwatt/env", name  # required: no start without the settings
    assert s["User"] == s["Group"] == "fleetwatt", name
    assert s["WorkingDirectory"] == INSTALL_DIR, name  # gunicorn.conf.py and manage.py are there
    for key, value in HARDENING.items():
        assert s.get(key) == value, f"{name}: {key}={s.get(key)!r}, not {value!r}"
    assert s["Restart"] == "on-failure", name
    argv = shlex.split(s["ExecStart"])
    assert argv[0].startswith(f"{INSTALL_DIR}/.venv/bin/"), argv
    assert (ROOT / ".venv" / "bin" / Path(argv[0]).name).exists(), f"{argv[0]}: not a command of the venv"


def test_web_serves_with_gunicorn_conf() -> None:
    s = service("fleetwatt-web.service")
    argv = shlex.split(s["ExecStart"])
    assert argv[1:] == ["fleetwatt.wsgi"], argv  # the rest comes from gunicorn.conf.py in WorkingDirectory
    assert (ROOT / "gunicorn.conf.py").exists()
    assert int(s["TimeoutStopSec"]) > 30, "longer than GUNICORN_TIMEOUT's default"


def test_workers_are_a_template_with_a_name_each() -> None:
    s = service("fleetwatt-worker@.service")
    argv = shlex.split(s["ExecStart"])
    assert argv[1:4] == ["-A", "fleetwatt", "worker"], argv
    node = argv[argv.index("-n") + 1]
    assert "%i" in node and "%H" in node, "two instances on a host must not share a Celery node name"
    assert s["KillMode"] == "mixed", "SIGTERM to the main process: Celery's warm shutdown"


def test_beat_keeps_its_schedule_in_its_state_directory() -> None:
    s = service("fleetwatt-beat.service")
    argv = shlex.split(s["ExecStart"])
    assert argv[1:4] == ["-A", "fleetwatt", "beat"], argv
    schedule = argv[argv.index("-s") + 1]
    assert schedule.startswith(f"/var/lib/{s['StateDirectory']}/"), "ProtectSystem=strict: only there is writable"


def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is missing (Debian's systemd): the structural checks above still ran")
    # the units as installed, with the install directory being this checkout (so that ExecStart exists)
    for name in UNIT_NAMES:
        (tmp_path / name).write_text((UNITS / name).read_text().replace(INSTALL_DIR, str(ROOT)))
    (tmp_path / "fleetwatt-worker@1.service").symlink_to(tmp_path / "fleetwatt-worker@.service")
    names = ["fleetwatt-web.service", "fleetwatt-beat.service", "fleetwatt-worker@1.service"]
    proc = subprocess.run(
        [analyze, "verify", *names], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    # an unknown or misspelt key is only a warning: any line about these files fails too
    ours = [line for line in proc.stderr.splitlines() if "fleetwatt-" in line]
    assert proc.returncode == 0 and not ours, proc.stderr
