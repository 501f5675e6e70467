"""Flags, each with a FLEETWATT_AGENT_* environment fallback (flag > environment > default)."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetwatt_agent import __version__
from fleetwatt_agent.errors import ConfigError

ENV_PREFIX = "FLEETWATT_AGENT_"


@dataclass(frozen=True)
class Config:
    backend: str
    replay: str | None
    replay_speed: float
    replay_keep_time: bool
    replay_exit: bool
    record: str | None
    listen_host: str
    listen_port: int
    interval_s: float
    energy_interval_s: float
    linger_s: float
    hostname: str
    proc_root: str
    sys_root: str
    pod_resources_socket: str
    gpus: list[int] | None
    log_level: str


def _env(environ: Mapping[str, str], name: str, default: str | None) -> str | None:
    return environ.get(ENV_PREFIX + name, default)


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--listen wants HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    def e(name: str, default: str | None = None) -> str | None:
        return _env(environ, name, default)

    p = argparse.ArgumentParser(
        prog="fleetwatt-agent",
        description="Per-job GPU energy on shared GPUs, exported to Prometheus. Every flag falls back "
        "to FLEETWATT_AGENT_<FLAG> in the environment (e.g. FLEETWATT_AGENT_LINGER=600).",
    )
    p.add_argument("--version", action="version", version=f"fleetwatt-agent {__version__}")
    p.add_argument("--backend", choices=["nvml", "drm", "replay"], default=e("BACKEND", "nvml"))
    p.add_argument("--replay", metavar="FILE", default=e("REPLAY"), help="trace to play (--backend replay)")
    p.add_argument(
        "--replay-speed",
        type=float,
        default=e("REPLAY_SPEED", "1"),
        help="1: real time; N: N times faster; 0: as fast as possible (default 1)",
    )
    p.add_argument(
        "--replay-keep-time",
        action="store_true",
        default=_bool(e("REPLAY_KEEP_TIME", "0")),
        help="keep the recorded Unix times instead of shifting the first tick to now",
    )
    p.add_argument(
        "--replay-exit",
        action="store_true",
        default=_bool(e("REPLAY_EXIT", "0")),
        help="exit when the trace ends (default: keep serving the final values)",
    )
    p.add_argument("--record", metavar="FILE", default=e("RECORD"), help="write a JSONL trace of every tick")
    p.add_argument(
        "--listen",
        default=e("LISTEN", "127.0.0.1:9877"),
        help="HOST:PORT for /metrics, /jobs, /healthz (default 127.0.0.1:9877; port 0 picks one)",
    )
    p.add_argument("--interval", type=float, default=e("INTERVAL", "1"), help="seconds between samples")
    p.add_argument(
        "--energy-interval",
        type=float,
        default=e("ENERGY_INTERVAL", "10"),
        help="seconds between reads of the driver's energy counter; power is integrated in "
        "between and scaled to the counter (default 10; 0: every sample)",
    )
    p.add_argument(
        "--linger",
        type=float,
        default=e("LINGER", "300"),
        help="seconds a job's series stay exported after it leaves a GPU (default 300)",
    )
    p.add_argument("--hostname", default=e("HOSTNAME") or socket.gethostname())
    p.add_argument("--proc-root", default=e("PROC_ROOT", "/proc"))
    p.add_argument("--sys-root", default=e("SYS_ROOT", "/sys"))
    p.add_argument(
        "--pod-resources-socket", default=e("POD_RESOURCES_SOCKET", "/var/lib/kubelet/pod-resources/kubelet.sock")
    )
    p.add_argument("--gpus", default=e("GPUS"), help="comma-separated GPU indices to watch (default: all)")
    p.add_argument("--log-level", default=e("LOG_LEVEL", "INFO"))
    return p


def _bool(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    try:
        args = build_parser(environ).parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise ConfigError("invalid arguments (see --help)") from None
        raise
    host, port = parse_listen(args.listen)
    if args.interval <= 0:
        raise ConfigError("--interval must be positive")
    if args.backend == "replay" and not args.replay:
        raise ConfigError("--backend replay needs --replay FILE")
    gpus = None
    if args.gpus:
        try:
            gpus = [int(x) for x in str(args.gpus).split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--gpus wants indices like 0,1, got {args.gpus!r}") from None
    return Config(
        backend=args.backend,
        replay=args.replay,
        replay_speed=float(args.replay_speed),
        replay_keep_time=bool(args.replay_keep_time),
        replay_exit=bool(args.replay_exit),
        record=args.record,
        listen_host=host,
        listen_port=port,
        interval_s=float(args.interval),
        energy_interval_s=max(float(args.energy_interval), 0.0),
        linger_s=float(args.linger),
        hostname=args.hostname,
        proc_root=args.proc_root,
        sys_root=args.sys_root,
        pod_resources_socket=args.pod_resources_socket,
        gpus=gpus,
        log_level=str(args.log_level).upper(),
    )
