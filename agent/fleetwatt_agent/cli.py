"""fleetwatt-agent: the command line. One process per GPU node."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from fleetwatt_agent import __version__
from fleetwatt_agent.auth import TokenFile, is_loopback
from fleetwatt_agent.backends.base import Backend, Resolver
from fleetwatt_agent.collector import make_registry
from fleetwatt_agent.config import Config, load
from fleetwatt_agent.discovery import ProcResolver
from fleetwatt_agent.errors import BackendUnavailable, ConfigError
from fleetwatt_agent.gputime import GpuTimeBackend, GpuTimeReader
from fleetwatt_agent.power_model import PowerStats, state_load, state_save
from fleetwatt_agent.recorder import Recorder, header
from fleetwatt_agent.sampler import Sampler, SamplerSettings
from fleetwatt_agent.server import AgentHTTPServer, HttpSettings

log = logging.getLogger("fleetwatt_agent")

POWER_MODEL_SAVE_S = 300.0  # --power-model-file is written this often, and at exit


def make_backend(cfg: Config) -> Backend:
    hardware: Backend
    if cfg.backend == "nvml":
        from fleetwatt_agent.backends.nvml import NvmlBackend

        hardware = NvmlBackend(gpu_indices=cfg.gpus)
    elif cfg.backend == "drm":
        from fleetwatt_agent.backends.drm import DrmBackend

        hardware = DrmBackend(sys_root=cfg.sys_root, proc_root=cfg.proc_root)
    else:
        return replay_backend(cfg)
    if cfg.gpu_time_dir is None:
        return hardware
    return GpuTimeBackend(hardware, GpuTimeReader(cfg.gpu_time_dir, proc_root=cfg.proc_root))


def replay_backend(cfg: Config) -> Backend:
    """A recording played back: its processes' GPU-time counters come from the trace."""
    from fleetwatt_agent.backends.replay import ReplayBackend

    assert cfg.replay is not None
    return ReplayBackend(cfg.replay, speed=cfg.replay_speed, keep_time=cfg.replay_keep_time)


def make_resolver(cfg: Config, backend: Backend) -> Resolver:
    own = backend.resolver()
    if own is not None:
        return own
    pods = None
    if Path(cfg.pod_resources_socket).exists():
        from fleetwatt_agent.kubelet import PodResourcesNames

        pods = PodResourcesNames(cfg.pod_resources_socket)
    return ProcResolver(cfg.proc_root, pods=pods)


def power_models_load(path: str | None) -> dict[str, PowerStats]:
    """The saved calibration; an unreadable or invalid file is logged and the agent starts afresh (the
    calibration is an optimisation, never a reason not to measure)."""
    if not path:
        return {}
    try:
        models = state_load(path)
    except (OSError, ValueError) as exc:
        log.warning("--power-model-file %s: %s; calibrating afresh", path, exc)
        return {}
    log.info("power model calibration read from %s: %s", path, ", ".join(sorted(models)) or "no GPU model yet")
    return models


def power_models_save(path: str | None, sampler: Sampler) -> None:
    if not path:
        return
    try:
        state_save(path, sampler.power_state())
    except OSError as exc:
        log.warning("cannot write --power-model-file %s: %s", path, exc)


def fail(message: str, code: int) -> int:
    """One clear line on stderr, no traceback."""
    print(f"fleetwatt-agent: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cfg = load(argv)
    except ConfigError as exc:
        return fail(str(exc), 2)
    logging.basicConfig(
        level=getattr(logging, cfg.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    token = None
    if cfg.auth_token_file:
        try:
            token = TokenFile(cfg.auth_token_file)
        except (OSError, ValueError) as exc:
            return fail(f"--auth-token-file {cfg.auth_token_file}: {exc}", 2)
    elif not is_loopback(cfg.listen_host):
        log.warning(
            "serving /metrics (user, account and job names included) without a token on %s:%d "
            "(--allow-unauthenticated); /jobs answers only to loopback peers",
            cfg.listen_host,
            cfg.listen_port,
        )
    backend = make_backend(cfg)
    try:
        info = backend.open()
    except BackendUnavailable as exc:
        return fail(str(exc), 3)
    recorder = None
    if cfg.record:
        try:
            recorder = Recorder(
                cfg.record,
                header(info, hostname=cfg.hostname, interval_s=cfg.interval_s, energy_interval_s=cfg.energy_interval_s),
            )
        except OSError as exc:
            backend.close()
            return fail(f"cannot write the trace {cfg.record}: {exc}", 2)
    sampler = Sampler(
        backend,
        info,
        make_resolver(cfg, backend),
        SamplerSettings(
            hostname=cfg.hostname,
            interval_s=cfg.interval_s,
            energy_interval_s=cfg.energy_interval_s,
            linger_s=cfg.linger_s,
            split=cfg.split,
        ),
        sink=recorder,
        power_models=power_models_load(cfg.power_model_file),
    )
    try:
        server = AgentHTTPServer(
            (cfg.listen_host, cfg.listen_port),
            make_registry(sampler.snapshot),
            sampler.snapshot,
            HttpSettings(workers=cfg.http_workers, timeout_s=cfg.http_timeout_s, backlog=cfg.http_backlog),
            token,
        )
    except OSError as exc:
        backend.close()
        return fail(f"cannot listen on {cfg.listen_host}:{cfg.listen_port}: {exc}", 4)
    server.serve_in_thread()
    # Tests and scripts read this line for the port (with --listen HOST:0) and then poll /healthz.
    print(
        f"fleetwatt-agent {__version__} listening on http://{cfg.listen_host}:{server.server_port} "
        f"(backend {info.backend}, {len(info.gpus)} GPU(s), driver {info.driver or '-'}, "
        f"{'token required' if token else 'no token'})",
        flush=True,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker = threading.Thread(target=sampler.run, args=(stop,), name="fleetwatt-sampler", daemon=True)
    worker.start()
    saved_at = time.monotonic()
    try:
        while not stop.is_set():
            stop.wait(0.5)
            if not worker.is_alive() and (cfg.replay_exit or cfg.backend != "replay"):
                break
            if time.monotonic() - saved_at >= POWER_MODEL_SAVE_S:
                saved_at = time.monotonic()
                power_models_save(cfg.power_model_file, sampler)
    finally:
        stop.set()
        worker.join(timeout=5.0)
        power_models_save(cfg.power_model_file, sampler)
        server.shutdown()
        server.server_close()
        backend.close()
        if recorder is not None:
            recorder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
