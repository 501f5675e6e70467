"""A Prometheus holding what the deploy kit reads in production: the simulator's history, the recording
rules of deploy/prometheus/rules.yml backfilled over it by promtool, and fleetwatt's own /metrics
gauges."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from apps.simulator.exposition import openmetrics_write
from apps.simulator.local_prometheus import PROMTOOL, LocalPrometheus, blocks_create, config_write, free_port
from tests.conftest import SIM_LABELS, LoadedHistory
from tests.deploy.containers import BuiltImage, agent_image_build, app_image_build, build_context_copy
from tests.scenarios import spine_scenario

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "rules.yml"
APP_LABELS = {"job": "fleetwatt", "instance": "fleetwatt-web:8000"}
APP_CLUSTER = "default"  # the name cluster_for gives the spine's cluster


@dataclass
class DeployPrometheus:
    history: LoadedHistory
    prometheus: LocalPrometheus

    @property
    def url(self) -> str:
        return self.prometheus.url

    @property
    def start(self) -> float:
        return self.history.scenario.t0

    @property
    def end(self) -> float:
        return self.history.scenario.t0 + self.history.scenario.duration_s

    def query_range(self, expr: str, step_s: int = 60) -> list[dict[str, Any]]:
        """The expression over the whole simulated history; a PromQL error fails the caller's test."""
        resp = requests.post(
            f"{self.url}/api/v1/query_range",
            data={"query": expr, "start": self.start, "end": self.end, "step": step_s},
            timeout=60,
        )
        body = resp.json()
        assert resp.status_code == 200 and body.get("status") == "success", f"{expr!r}: {body.get('error', body)}"
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def label_values(self, label: str, selector: str) -> list[str]:
        resp = requests.get(
            f"{self.url}/api/v1/label/{label}/values",
            params={"match[]": selector, "start": self.start, "end": self.end},
            timeout=30,
        )
        body = resp.json()
        assert resp.status_code == 200 and body.get("status") == "success", f"{selector!r}: {body.get('error', body)}"
        return sorted(body["data"])


def recording_rules_write(path: Path) -> int:
    """rules.yml's recording rules only: promtool's rule backfill would record each alert's expression
    as a series named after the alert."""
    doc = yaml.safe_load(RULES.read_text())
    groups = [
        {**group, "rules": [rule for rule in group["rules"] if "record" in rule]}
        for group in doc["groups"]
        if any("record" in rule for rule in group["rules"])
    ]
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return sum(len(group["rules"]) for group in groups)


def app_metrics_write(path: Path, start: float, end: float, step_s: int) -> int:
    """fleetwatt's own gauges, shaped as its /metrics serves them, for the simulated hours: beat ingests
    each closed hour five minutes after it ends, in 4.2 s. Returns the number of samples written."""
    lag: list[str] = []
    duration: list[str] = []
    labels = f'cluster="{APP_CLUSTER}",instance="{APP_LABELS["instance"]}",job="{APP_LABELS["job"]}"'
    t = start
    while t <= end:
        watermark = math.floor((t - 300) / 3600) * 3600  # end of the last ingested hour
        lag.append(f"fleetwatt_ingest_lag_seconds{{{labels}}} {t - watermark!r} {t:.3f}")
        duration.append(f"fleetwatt_ingest_last_duration_seconds{{{labels}}} 4.2 {t:.3f}")
        t += step_s
    path.write_text(
        "# HELP fleetwatt_ingest_lag_seconds Now minus the end of the cluster's last ingested hour.\n"
        "# TYPE fleetwatt_ingest_lag_seconds gauge\n" + "\n".join(lag) + "\n"
        "# HELP fleetwatt_ingest_last_duration_seconds Wall seconds of the cluster's last ingest run.\n"
        "# TYPE fleetwatt_ingest_last_duration_seconds gauge\n" + "\n".join(duration) + "\n# EOF\n"
    )
    return len(lag) + len(duration)


@pytest.fixture(scope="session")
def deploy_prometheus(
    history_loader: Callable[[dict[str, Any]], LoadedHistory], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeployPrometheus]:
    history = history_loader(spine_scenario())
    sc = history.scenario
    folder = tmp_path_factory.mktemp("deploy-prometheus")
    data = folder / "data"
    # The simulator's samples, as history_loader's Prometheus holds them.
    with (folder / "history.om").open("w") as out:
        written = openmetrics_write(history.sim.series(), out, extra_labels=SIM_LABELS)
    blocks_create(folder / "history.om", data, expected_samples=written)
    app_written = app_metrics_write(folder / "app.om", sc.t0, sc.t0 + sc.duration_s, sc.scrape_interval_s)
    blocks_create(folder / "app.om", data, expected_samples=app_written)
    # The recording rules, evaluated by promtool against history_loader's Prometheus once a minute.
    assert recording_rules_write(folder / "recording.yml") > 0
    proc = subprocess.run(
        [
            PROMTOOL,
            "tsdb",
            "create-blocks-from",
            "rules",
            f"--url={history.url}",
            f"--start={int(sc.t0)}",
            f"--end={int(sc.t0 + sc.duration_s)}",
            "--eval-interval=60s",
            f"--output-dir={data}",
            str(folder / "recording.yml"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"promtool rule backfill failed: {proc.stderr.strip() or proc.stdout.strip()}"
    config_write(folder / "prometheus.yml", targets=[], scrape_interval_s=sc.scrape_interval_s)
    prometheus = LocalPrometheus(data, folder / "prometheus.yml", free_port())
    prometheus.start(log=folder / "prometheus.log")
    try:
        yield DeployPrometheus(history, prometheus)
    finally:
        prometheus.stop()


@pytest.fixture(scope="session")
def app_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltImage]:
    """The app's image, built from the Dockerfile by podman over the debootstrapped base
    (scripts/containers.sh, which installs podman first where it is missing), from a copy of the checkout
    with secrets planted in it; removed at the end."""
    yield from app_image_build(build_context_copy(tmp_path_factory.mktemp("image-context")))


@pytest.fixture(scope="session")
def agent_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltImage]:
    """The agent's image, built once a session from agent/deploy/Dockerfile over the same debootstrapped base
    (scripts/containers.sh build-agent), from a copy of the checkout; removed at the end."""
    yield from agent_image_build(build_context_copy(tmp_path_factory.mktemp("agent-image-context")))
