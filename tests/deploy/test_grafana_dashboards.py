"""deploy/grafana/*.json: the dashboards' structure, and every panel's PromQL evaluated by a real
Prometheus holding the simulator's six hours (tests/deploy/conftest.py), with the template variables
resolved as Grafana resolves them: "All", and the first value label_values offers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import DEPLOY, DeployPrometheus

pytestmark = pytest.mark.prometheus

DASHBOARDS = sorted((DEPLOY / "grafana").glob("*.json"))
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
VARIABLES = ("datasource", "cluster", "node", "team")
SCHEMA_VERSION = 41  # Grafana 12's classic dashboard model
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$", re.S)


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    out = []
    for panel in doc["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _definition(variable: dict[str, Any]) -> str:
    query = variable.get("query")
    text = query.get("query", "") if isinstance(query, dict) else str(query or "")
    return str(variable.get("definition") or text)


def test_both_dashboards_are_there() -> None:
    assert [p.name for p in DASHBOARDS] == ["fleetwatt-agent.json", "fleetwatt-fleet.json"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_structure(path: Path) -> None:
    doc = _load(path)
    assert doc["schemaVersion"] == SCHEMA_VERSION
    assert doc["uid"] == path.stem and doc["title"]
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert tuple(variables) == VARIABLES, "variables, in the order they resolve"
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in VARIABLES[1:]:
        variable = variables[name]
        assert variable["type"] == "query" and variable["datasource"] == DATASOURCE, name
        assert LABEL_VALUES.match(_definition(variable)), f"{name}: not a label_values query"
        assert variable["includeAll"] and variable["allValue"] == ".*", name
    panels = _panels(doc)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {path.name}"
    queried = [p for p in panels if p["type"] != "row"]
    assert queried, "no panels"
    for panel in panels:
        assert panel.get("datasource") == DATASOURCE, panel["title"]
    for panel in queried:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target.get("datasource") == DATASOURCE, f"{panel['title']} {target['refId']}"
            assert target["expr"].strip(), panel["title"]
        used = " ".join(t["expr"] for t in panel["targets"])
        assert "$cluster" in used, f"{panel['title']}: not filtered by cluster"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_variable_is_used(path: Path) -> None:
    doc = _load(path)
    exprs = " ".join(t["expr"] for p in _panels(doc) for t in p.get("targets", []))
    for name in VARIABLES[1:]:
        assert f"${name}" in exprs, f"${name} filters no panel of {path.name}"


def _substitute(text: str, values: dict[str, str], range_s: int) -> str:
    """Grafana's interpolation of what the dashboards use: $var / ${var} and the built-in intervals
    ($__rate_interval for a 15 s scrape and a 1 m step: 4 scrape intervals)."""
    builtins = {"__rate_interval": "1m", "__interval": "1m", "__range": f"{range_s}s", "__range_s": str(range_s)}
    every = {**builtins, **values}
    for name in sorted(every, key=len, reverse=True):
        text = text.replace("${" + name + "}", every[name]).replace("$" + name, every[name])
    assert "$" not in text.replace("$1", ""), f"unresolved variable in {text!r}"
    return text


def _regex_escape(value: str) -> str:
    """A value inside =~"...", as Grafana's Prometheus data source escapes it (a backslash doubled for
    the PromQL string)."""
    return re.sub(r"[\\^$*+?.()|\[\]{}/]", lambda m: "\\\\" + m[0], value)


def _resolve(doc: dict[str, Any], prom: DeployPrometheus, choose_first: bool) -> dict[str, str]:
    """Each query variable in order, from label_values over the history (earlier choices substituted):
    "All" (.*), or the first value offered (All where none is)."""
    values: dict[str, str] = {}
    range_s = int(prom.end - prom.start)
    for variable in doc["templating"]["list"]:
        if variable["type"] != "query":
            continue
        m = LABEL_VALUES.match(_definition(variable))
        assert m, variable["name"]
        offered = prom.label_values(m["label"], _substitute(m["selector"], values, range_s))
        values[variable["name"]] = _regex_escape(offered[0]) if choose_first and offered else variable["allValue"]
    return values


@pytest.mark.parametrize("choose_first", [False, True], ids=["all", "first-values"])
@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_query_returns_series(path: Path, choose_first: bool, deploy_prometheus: DeployPrometheus) -> None:
    doc = _load(path)
    values = _resolve(doc, deploy_prometheus, choose_first)
    if choose_first:
        # The simulator's series carry no cluster label, so cluster stays All; node and team get values.
        assert values["node"] != ".*" and values["team"] != ".*", values
    range_s = int(deploy_prometheus.end - deploy_prometheus.start)
    empty = []
    for panel in _panels(doc):
        for target in panel.get("targets", []):
            expr = _substitute(target["expr"], values, range_s)
            if not deploy_prometheus.query_range(expr):
                empty.append(f"{panel['title']} {target['refId']}: {expr}")
    assert not empty, f"queries without series (variables {values}):\n" + "\n".join(empty)


def test_team_panel_names_the_simulated_teams(deploy_prometheus: DeployPrometheus) -> None:
    """Energy by team: the Slurm accounts of the agent nodes' jobs, and unassigned for the bare process."""
    result = deploy_prometheus.query_range("sum by (team) (fleetwatt:job_team_energy_watts:rate5m)")
    assert {s["metric"]["team"] for s in result} == {"vision", "nlp", "bio", "unassigned"}
