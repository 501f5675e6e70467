"""deploy/prometheus/rules.yml: promtool's own checks and unit tests (rules_test.yml), every alert's
runbook in docs/operations.md, and the alerts over the simulator's history with its faults."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.simulator.local_prometheus import PROMTOOL
from tests.deploy.conftest import RULES, DeployPrometheus

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
RULES_TEST = RULES.parent / "rules_test.yml"
OPERATIONS = ROOT / "docs" / "operations.md"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=RULES.parent)


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def _duration_s(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", text))


def test_promtool_check_rules() -> None:
    proc = _promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_test_rules() -> None:
    proc = _promtool("test", "rules", str(RULES_TEST))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    """Each alert has a test case where it fires and an evaluation where it does not."""
    doc = yaml.safe_load(RULES_TEST.read_text())
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in doc["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {alert["alert"] for alert in _alerts()}
    assert names - fired == set(), "alerts never seen firing in rules_test.yml"
    assert names - quiet == set(), "alerts never seen quiet in rules_test.yml"


def test_every_alert_has_severity_for_annotations_and_runbook() -> None:
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("#")
    }
    for alert in _alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in ("info", "warning", "critical"), name
        assert "for" in alert or name == "FleetwattGpuEnergyCounterReset", f"{name}: no `for`"
        annotations = alert["annotations"]
        assert annotations.get("summary") and annotations.get("description"), name
        page, _, anchor = annotations["runbook_url"].partition("#")
        assert page == "docs/operations.md" and anchor == name.lower(), name
        assert anchor in anchors, f"{name}: docs/operations.md has no heading for #{anchor}"


def test_ingest_lag_alert_is_the_agreed_one() -> None:
    """FleetwattIngestLagging is the rule fleetwatt's metrics were named for (max lag per cluster > 3 h, 15 m)."""
    (alert,) = [a for a in _alerts() if a["alert"] == "FleetwattIngestLagging"]
    assert alert["expr"].strip() == "max by (cluster) (fleetwatt_ingest_lag_seconds) > 3 * 3600"
    assert alert["for"] == "15m"


def _firing(prom: DeployPrometheus, alert: dict[str, Any]) -> set[tuple[tuple[str, str], ...]]:
    """The label sets the alert would fire for over the history: its expression true at every
    once-a-minute evaluation for at least its `for`."""
    hold_s = _duration_s(alert.get("for", "0s"))
    firing = set()
    for series in prom.query_range(alert["expr"], step_s=60):
        times = [float(t) for t, _ in series["values"]]
        run_start = prev = times[0]
        for t in times[1:]:
            if t - prev > 60:  # a missed evaluation resets the pending state
                run_start = t
            prev = t
            if t - run_start >= hold_s:
                break
        if prev - run_start >= hold_s:
            firing.add(tuple(sorted((k, v) for k, v in series["metric"].items() if k != "__name__")))
    return firing


def test_alerts_over_the_simulated_history(deploy_prometheus: DeployPrometheus) -> None:
    """The spine scenario stops slurm-b's agent for 15 minutes (1h20m), loses its scrapes for 12 (4h40m)
    and resets the driver counter of its GPU 1 (4h12m); nothing else is wrong with it. The outage fires
    the absent-series alert and, its 15-minute coverage staying under 90 % for about 28 minutes, the
    coverage alert; the scrape gap is too short for either; the reset fires its own. The invariant,
    the DCGM comparison and missed ticks stay quiet over six hours of real-shaped series."""
    got = {alert["alert"]: _firing(deploy_prometheus, alert) for alert in _alerts()}
    gpu1 = (("gpu", "1"), ("hostname", "slurm-b"), ("instance", "simulator:9400"), ("job", "fleetwatt-sim"))
    assert got == {
        "FleetwattAgentDown": set(),  # nothing was scraped: `up` is not in backfilled history
        "FleetwattAgentSeriesAbsent": {(("hostname", "slurm-b"),)},
        "FleetwattAgentMissingSamples": set(),
        "FleetwattGpuEnergyCounterReset": {(*gpu1, ("uuid", _uuid(deploy_prometheus, "slurm-b", "1")))},
        "FleetwattInvariantResidual": set(),
        "FleetwattCoverageLow": {(("hostname", "slurm-b"),)},
        "FleetwattDcgmDisagreement": set(),
        "FleetwattIngestLagging": set(),
    }


def _uuid(prom: DeployPrometheus, hostname: str, gpu: str) -> str:
    (uuid,) = prom.label_values("uuid", f'fleetwatt_gpu_power_watts{{hostname="{hostname}", gpu="{gpu}"}}')
    return uuid
