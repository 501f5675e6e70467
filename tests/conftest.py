"""Shared fixtures: real Postgres (pytest-django), and real Prometheus servers loaded with simulated
history through promtool (and the same history in VictoriaMetrics, through its import API)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from apps.simulator.engine import FleetSimulation, JobTruth
from apps.simulator.exposition import import_text_write, openmetrics_write
from apps.simulator.local_prometheus import LocalPrometheus, blocks_create, config_write, free_port
from apps.simulator.local_victoria import LocalVictoria
from apps.simulator.scenario import Scenario, scenario_from_dict

_STARTED = pytest.StashKey[float]()
SIM_LABELS = {"job": "fleetwatt-sim", "instance": "simulator:9400"}
ROOT = Path(__file__).resolve().parents[1]

# `make test` spreads the test modules over two processes (pytest-xdist): a module's tests stay in one process, so
# a module's shared world is built once. What uses something the whole machine has one of (podman's containers and
# images, the local Slurm, the demo's script) runs in one process, one test after the other, and first: it is the
# longest. So do the fuzz suites, which count their cases in one process's memory.
ONE_PROCESS = {
    "host": ("tests/deploy/", "tests/schedulers/test_local_slurm", "tests/schedulers/test_sync_local_slurm",
             "tests/faults/test_demo_guard"),
    "fuzz": ("tests/fuzz/",),
}  # fmt: skip


def _scope(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return next((name for name, where in ONE_PROCESS.items() if module.startswith(where)), module)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndMachineWide(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # the order of the collection, below: the machine's tests first
    return ModulesAndMachineWide(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: _scope(item.nodeid) != "host")  # (stable: the rest keep their order)


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.time()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The fuzz suites' count of cases (tests/fuzz/conftest.py writes it where they ran)."""
    counts = ROOT / "test-artifacts" / "fuzz-cases.json"  # tests/fuzz/conftest.py: FUZZ_CASES
    if not counts.exists() or counts.stat().st_mtime < config.stash.get(_STARTED, 0.0):
        return
    cases: dict[str, int] = json.loads(counts.read_text())
    terminalreporter.write_line(
        f"fuzz: {sum(cases.values())} cases over {len(cases)} endpoints and pages "
        f"(fewest: {min(cases.values())}, per endpoint in test-artifacts/fuzz-cases.json)"
    )


@dataclass
class LoadedHistory:
    scenario: Scenario
    sim: FleetSimulation
    truth: dict[str, JobTruth]
    prometheus: LocalPrometheus | LocalVictoria  # the engine that holds it

    @property
    def url(self) -> str:
        return self.prometheus.url


Serve = Callable[[Scenario, FleetSimulation, Path], LocalPrometheus | LocalVictoria]


def _histories(tmp_path_factory: pytest.TempPathFactory, engine: str, serve: Serve) -> Iterator[Callable[..., Any]]:
    """`load(scenario)`: the scenario simulated once and served by the engine `serve` starts (cached by scenario)."""
    loaded: dict[str, LoadedHistory] = {}

    def load(raw: dict[str, Any]) -> LoadedHistory:
        key = json.dumps(raw, sort_keys=True)
        if key not in loaded:
            scenario = scenario_from_dict(raw)
            sim = FleetSimulation(scenario)
            server = serve(scenario, sim, tmp_path_factory.mktemp(f"{engine}-{scenario.name}"))
            loaded[key] = LoadedHistory(scenario, sim, sim.truth(), server)
        return loaded[key]

    yield load
    for history in loaded.values():
        history.prometheus.stop()


def _prometheus_serve(scenario: Scenario, sim: FleetSimulation, folder: Path) -> LocalPrometheus:
    """Backfill the history with promtool into a fresh Prometheus, and start it."""
    history = folder / "history.om"
    with history.open("w") as out:
        written = openmetrics_write(sim.series(), out, extra_labels=SIM_LABELS)
    blocks_create(history, folder / "data", expected_samples=written)
    config_write(folder / "prometheus.yml", targets=[], scrape_interval_s=scenario.scrape_interval_s)
    prometheus = LocalPrometheus(folder / "data", folder / "prometheus.yml", free_port())
    prometheus.start(log=folder / "prometheus.log")
    return prometheus


def _victoria_serve(scenario: Scenario, sim: FleetSimulation, folder: Path) -> LocalVictoria:
    """A fresh VictoriaMetrics holding the very samples promtool backfills, millisecond for millisecond,
    imported through /api/v1/import/prometheus."""
    history = folder / "history.txt"
    with history.open("w") as out:
        written = import_text_write(sim.series(), out, extra_labels=SIM_LABELS)
    victoria = LocalVictoria(folder / "data")
    victoria.start(log=folder / "victoria-metrics.log")
    victoria.history_import(history, expected=written)
    return victoria


@pytest.fixture(scope="session")
def history_loader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[dict[str, Any]], LoadedHistory]]:
    """Simulate a scenario, backfill it with promtool into a fresh Prometheus, start it (cached)."""
    yield from _histories(tmp_path_factory, "prometheus", _prometheus_serve)


@pytest.fixture(scope="session")
def victoria_history_loader(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[dict[str, Any]], LoadedHistory]]:
    """As history_loader, into a fresh VictoriaMetrics (cached)."""
    yield from _histories(tmp_path_factory, "victoria", _victoria_serve)


ENGINES = ("prometheus", "victoria-metrics")


@pytest.fixture
def engine_loader(
    request: pytest.FixtureRequest,
) -> Callable[[str, dict[str, Any]], LoadedHistory]:
    """`load(engine, scenario)`: the scenario's history in the engine named (one of ENGINES)."""

    def load(engine: str, raw: dict[str, Any]) -> LoadedHistory:
        fixture = {"prometheus": "history_loader", "victoria-metrics": "victoria_history_loader"}[engine]
        loader: Callable[[dict[str, Any]], LoadedHistory] = request.getfixturevalue(fixture)
        return loader(raw)

    return load


@pytest.fixture
def cluster_for(db: None) -> Callable[[LoadedHistory], Any]:
    from apps.fleet.models import Cluster

    def make(history: LoadedHistory, name: str = "default") -> Cluster:
        cluster, _ = Cluster.objects.update_or_create(
            name=name,
            defaults={"prometheus_url": history.url, "scrape_interval_s": history.scenario.scrape_interval_s},
        )
        return cluster

    return make


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    """Cached rollups of one test must never answer another's (ids repeat across databases)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _forget_made_months() -> Iterator[None]:
    """The months whose partitions this process made (apps.telemetry.partitions) roll back with a test's
    transaction: the next test must not take them for made."""
    from apps.telemetry import partitions

    partitions._ensured.clear()
    yield
    partitions._ensured.clear()


@pytest.fixture(autouse=True)
def _fleetwatt_settings(settings: Any) -> None:
    settings.FLEETWATT_PROMETHEUS_URL = "http://127.0.0.1:9"  # never the developer's own server
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session", autouse=True)
def _close_stray_connections(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The live server's threads and the Celery worker keep connections to the test database; end
    them before pytest-django drops it."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        # Only ever a test database: never the developer's own, whatever this session was pointed at.
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND current_database() LIKE 'test\\_%%' "
            "AND pid <> pg_backend_pid()"
        )
