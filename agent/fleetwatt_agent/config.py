"""Flags, each with a FLEETWATT_AGENT_* environment fallback (flag > environment > default)."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetwatt_agent import __version__
from fleetwatt_agent.auth import is_loopback, read_token
from fleetwatt_agent.errors import ConfigError
from fleetwatt_agent.gputime import DEFAULT_DIR as DEFAULT_GPU_TIME_DIR
from fleetwatt_agent.split import DEFAULT_SPLIT, SPLITS, SplitChoice

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
    auth_token_file: str | None = None
    allow_unauthenticated: bool = False
    http_workers: int = 8
    http_timeout_s: float = 5.0
    http_backlog: int = 128
    split: SplitChoice = DEFAULT_SPLIT
    power_model_file: str | None = None
    gpu_time_dir: str | None = None  # None: exact GPU time not read


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
        help="HOST:PORT for /metrics, /jobs, /healthz (default 127.0.0.1:9877; port 0 picks one). A "
        "non-loopback HOST needs --auth-token-file, or --allow-unauthenticated",
    )
    p.add_argument(
        "--auth-token-file",
        metavar="FILE",
        default=e("AUTH_TOKEN_FILE"),
        help="a file holding the agent's token: /metrics and /jobs then require 'Authorization: Bearer "
        "<token>' (/healthz stays open); re-read when the file changes",
    )
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=_bool(e("ALLOW_UNAUTHENTICATED", "0")),
        help="serve /metrics without a token on a non-loopback --listen address (/jobs still answers "
        "only to loopback peers without a token)",
    )
    p.add_argument(
        "--http-workers",
        type=int,
        default=e("HTTP_WORKERS", "8"),
        help="requests answered at once (default 8); idle connections hold no worker",
    )
    p.add_argument(
        "--http-timeout-s",
        type=float,
        default=e("HTTP_TIMEOUT_S", "5"),
        help="seconds a connection has to send a whole request (after it opens, or after its previous "
        "answer) before it is closed (default 5)",
    )
    p.add_argument(
        "--http-backlog",
        type=int,
        default=e("HTTP_BACKLOG", "128"),
        help="listen queue length, for many scrapers connecting at once (default 128; the kernel caps it at "
        "net.core.somaxconn)",
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
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=e("SPLIT", DEFAULT_SPLIT),
        help="how jobs sharing an NVIDIA GPU split its energy: sm_time (by SM time) or sm_mem (by a power "
        f"model of SM and memory activity the agent calibrates itself; sm_time until it is) (default {DEFAULT_SPLIT})",
    )
    p.add_argument(
        "--power-model-file",
        metavar="FILE",
        default=e("POWER_MODEL_FILE"),
        help="keep the power model's calibration in FILE: read at start, written every 5 minutes and at exit",
    )
    p.add_argument(
        "--gpu-time-dir",
        metavar="DIR",
        default=e("GPU_TIME_DIR", DEFAULT_GPU_TIME_DIR),
        help="read the exact GPU time of processes that run the opt-in injection library from DIR (its "
        f"FLEETWATT_GPUTIME_DIR; default {DEFAULT_GPU_TIME_DIR}; '' to read none); jobs sharing a GPU that "
        "all have it are split by it (gpu_time)",
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
    if int(args.http_workers) < 1:
        raise ConfigError("--http-workers must be at least 1")
    if not 0 < float(args.http_timeout_s) <= 3600:
        raise ConfigError("--http-timeout-s must be positive, at most 3600")
    if int(args.http_backlog) < 1:
        raise ConfigError("--http-backlog must be at least 1")
    token_file = args.auth_token_file or None
    if token_file:
        try:
            read_token(token_file)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--auth-token-file {token_file}: {exc}") from None
    allow_unauthenticated = bool(args.allow_unauthenticated)
    if not token_file and not allow_unauthenticated and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host}:{port} without a token: /metrics and /jobs carry user, account and "
            "job names; give --auth-token-file FILE (FLEETWATT_AGENT_AUTH_TOKEN_FILE), or --allow-unauthenticated "
            "to serve /metrics to anyone who reaches the port"
        )
    if args.split not in SPLITS:  # argparse does not check a default taken from the environment
        raise ConfigError(f"--split wants one of {', '.join(SPLITS)}, got {args.split!r}")
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
        auth_token_file=token_file,
        allow_unauthenticated=allow_unauthenticated,
        http_workers=int(args.http_workers),
        http_timeout_s=float(args.http_timeout_s),
        http_backlog=int(args.http_backlog),
        split=args.split,
        power_model_file=args.power_model_file or None,
        gpu_time_dir=args.gpu_time_dir or None,
    )
