"""The fleet config: every validation rule names its path and writes nothing; apply is idempotent, reports
what it did, sets nodes' server types, and recomputes the footprints of the clusters it changed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.carbon import services
from apps.carbon.models import Basis, GpuModel, IntensityHour, JobGroup, ServerType, ServerTypeRule, Site
from apps.carbon.services import FootprintRefresh, node_server_types_apply
from apps.config import types as cfg
from apps.config.parse import config_load, config_parse
from apps.config.selectors import known_names_read
from apps.config.types import ConfigError, KnownNames, NodeMatch
from apps.fleet.models import Cluster, Node, Team, TeamRule
from apps.pipeline.inputs import config_apply

DEMO_FLEET = Path(__file__).resolve().parents[2] / "apps" / "simulator" / "scenarios" / "demo-fleet.yaml"


def base() -> dict[str, Any]:
    """A small valid config; each bad case below changes one thing in it."""
    return {
        "version": 1,
        "sites": [
            {
                "name": "dc-a",
                "grid_zone": "DE",
                "pue": 1.2,
                "electricity_price_per_kwh": 0.18,
                "currency": "EUR",
                "timezone": "Europe/Berlin",
            }
        ],
        "server_types": [
            {
                "name": "hgx",
                "node_overhead_factor": 1.3,
                "embodied_kg_per_server": 3000,
                "service_life_h": 43800,
                "gpus_per_server": 8,
            }
        ],
        "gpu_models": [{"name": "NVIDIA H200", "hourly_rate": 2.8, "currency": "EUR", "tdp_w": 700}],
        "clusters": [
            {
                "name": "c1",
                "prometheus_url": "http://prometheus:9090",
                "site": "dc-a",
                "nodes": [{"match": "gpu-*", "server_type": "hgx"}],
            }
        ],
        "teams": [
            {"name": "vision", "display_name": "Vision", "rules": [{"kind": "slurm_account", "value": "vision"}]}
        ],
        "job_groups": [{"name": "sweeps", "match_kind": "name_prefix", "match_value": "sweep-", "flexible": True}],
    }


def change(fn: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    doc = base()
    fn(doc)
    return doc


def site(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["sites"][0]


# (id, the document or YAML text, the path and the problem the error must name)
BAD: list[tuple[str, dict[str, Any] | str, str]] = [
    # the document
    ("empty file", "", "(document): the file is empty"),
    ("not yaml", "sites: [\n  {name: a\n", "not valid YAML"),
    (
        "duplicate yaml key",
        "sites:\n  - name: a\n    name: b\n",
        "line 3, column 5: not valid YAML: duplicate key 'name'",
    ),
    ("top not a mapping", "- a\n- b\n", "(document): expected a mapping"),
    ("unknown section", change(lambda d: d.update(site=[])), "site: unknown key (did you mean 'sites'?"),
    ("version", change(lambda d: d.update(version=2)), "version: this fleetwatt reads version 1, got 2"),
    ("section not a list", change(lambda d: d.update(sites={"name": "x"})), "sites: expected a list, got a mapping"),
    ("item not a mapping", change(lambda d: d["sites"].append("dc-b")), "sites[1]: expected a mapping, got a string"),
    # sites
    (
        "site typo",
        change(lambda d: site(d).update(pue_by_mnth={1: 1.2})),
        "sites[0].pue_by_mnth: unknown key (did you mean 'pue_by_month'?",
    ),
    ("site name required", change(lambda d: site(d).pop("name")), "sites[0].name: required"),
    ("site name slug", change(lambda d: site(d).update(name="dc a")), "sites[0].name: 'dc a' is not a slug"),
    (
        "site duplicate",
        change(lambda d: d["sites"].append(copy.deepcopy(site(d)))),
        "sites[1].name: 'dc-a' is already defined at sites[0]",
    ),
    ("zone required", change(lambda d: site(d).pop("grid_zone")), "sites[0].grid_zone: required"),
    (
        "zone NO is a boolean",
        "sites:\n  - {name: dc-n, grid_zone: NO, pue: 1.1, electricity_price_per_kwh: 0.1}\n",
        "sites[0].grid_zone: expected a string, got a boolean (false) (YAML reads unquoted yes/no/on/off/NO as",
    ),
    (
        "basis",
        change(lambda d: site(d).update(intensity_basis="average")),
        "sites[0].intensity_basis: expected one of location, market, marginal",
    ),
    ("pue under 1", change(lambda d: site(d).update(pue=0.9)), "sites[0].pue: must be at least 1, got 0.9"),
    ("pue not a number", change(lambda d: site(d).update(pue="1.2")), "sites[0].pue: expected a number, got a string"),
    (
        "pue month 13",
        change(lambda d: site(d).update(pue_by_month={13: 1.2})),
        "sites[0].pue_by_month.13: not a month (1..12)",
    ),
    (
        "pue month 0",
        change(lambda d: site(d).update(pue_by_month={0: 1.2})),
        "sites[0].pue_by_month.0: not a month (1..12)",
    ),
    (
        "pue month under 1",
        change(lambda d: site(d).update(pue_by_month={7: 0.95})),
        "sites[0].pue_by_month.7: must be at least 1, got 0.95",
    ),
    (
        "pue month twice",
        change(lambda d: site(d).update(pue_by_month={7: 1.3, "7": 1.3})),
        "sites[0].pue_by_month.7: month 7 is given twice",
    ),
    (
        "pue months partial",
        change(lambda d: (site(d).pop("pue"), site(d).update(pue_by_month={1: 1.2, 2: 1.2}))),
        "sites[0].pue: required: pue_by_month leaves out months 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
    ),
    (
        "pue not stated",
        change(lambda d: site(d).pop("pue")),
        "sites[0].pue: required: state the PUE with pue, pue_by_month",
    ),
    (
        "overhead twice: pue",
        change(lambda d: site(d).update(provider_includes_overhead=True, pue=1.3)),
        "sites[0].pue: must be absent or 1.0 when provider_includes_overhead is true",
    ),
    (
        "overhead twice: month",
        change(lambda d: site(d).update(provider_includes_overhead=True, pue=1.0, pue_by_month={7: 1.3})),
        "sites[0].pue_by_month.7: must be absent or 1.0 when provider_includes_overhead is true",
    ),
    (
        "inclusive not a boolean",
        change(lambda d: site(d).update(provider_includes_overhead="yes")),
        "sites[0].provider_includes_overhead: expected true or false, got a string ('yes')",
    ),
    (
        "price negative",
        change(lambda d: site(d).update(electricity_price_per_kwh=-0.1)),
        "sites[0].electricity_price_per_kwh: must be at least 0, got -0.1",
    ),
    (
        "price required",
        change(lambda d: site(d).pop("electricity_price_per_kwh")),
        "sites[0].electricity_price_per_kwh: required",
    ),
    (
        "price places",
        change(lambda d: site(d).update(electricity_price_per_kwh=0.123456)),
        "sites[0].electricity_price_per_kwh: at most 5 decimal places",
    ),
    (
        "currency",
        change(lambda d: site(d).update(currency="euro")),
        "sites[0].currency: expected an ISO 4217 code (three capital letters, e.g. EUR), got a string ('euro')",
    ),
    (
        "timezone",
        change(lambda d: site(d).update(timezone="Europe/Frankfurt")),
        "sites[0].timezone: 'Europe/Frankfurt' is not an IANA time zone",
    ),
    # server types
    (
        "overhead under 1",
        change(lambda d: d["server_types"][0].update(node_overhead_factor=0.8)),
        "server_types[0].node_overhead_factor: must be at least 1, got 0.8",
    ),
    (
        "embodied negative",
        change(lambda d: d["server_types"][0].update(embodied_kg_per_server=-1)),
        "server_types[0].embodied_kg_per_server: must be at least 0",
    ),
    (
        "embodied required",
        change(lambda d: d["server_types"][0].pop("embodied_kg_per_server")),
        "server_types[0].embodied_kg_per_server: required",
    ),
    (
        "life zero",
        change(lambda d: d["server_types"][0].update(service_life_h=0)),
        "server_types[0].service_life_h: must be greater than 0, got 0",
    ),
    (
        "life years zero",
        change(
            lambda d: (d["server_types"][0].pop("service_life_h"), d["server_types"][0].update(service_life_years=0))
        ),
        "server_types[0].service_life_years: must be greater than 0",
    ),
    (
        "life twice",
        change(lambda d: d["server_types"][0].update(service_life_years=5)),
        "server_types[0].service_life_h: give service_life_h or service_life_years, not both",
    ),
    (
        "life required",
        change(lambda d: d["server_types"][0].pop("service_life_h")),
        "server_types[0].service_life_h: required (or service_life_years)",
    ),
    (
        "gpus zero",
        change(lambda d: d["server_types"][0].update(gpus_per_server=0)),
        "server_types[0].gpus_per_server: must be between 1 and 32767, got 0",
    ),
    (
        "gpus fraction",
        change(lambda d: d["server_types"][0].update(gpus_per_server=2.5)),
        "server_types[0].gpus_per_server: expected a whole number, got a number (2.5)",
    ),
    # GPU models
    (
        "rate negative",
        change(lambda d: d["gpu_models"][0].update(hourly_rate=-1)),
        "gpu_models[0].hourly_rate: must be at least 0",
    ),
    (
        "rate places",
        change(lambda d: d["gpu_models"][0].update(hourly_rate=2.80001)),
        "gpu_models[0].hourly_rate: at most 4 decimal places",
    ),
    (
        "tdp zero",
        change(lambda d: d["gpu_models"][0].update(tdp_w=0)),
        "gpu_models[0].tdp_w: must be greater than 0, got 0",
    ),
    (
        "currencies differ",
        change(lambda d: d["gpu_models"][0].update(currency="USD")),
        "gpu_models[0].currency: USD differs from EUR at sites[0]",
    ),
    # clusters
    (
        "site unknown",
        change(lambda d: d["clusters"][0].update(site="dc-nowhere")),
        "clusters[0].site: unknown site 'dc-nowhere': not in this file nor in the database (known: dc-a",
    ),
    (
        "server type unknown",
        change(lambda d: d["clusters"][0]["nodes"][0].update(server_type="dgx")),
        "clusters[0].nodes[0].server_type: unknown server type 'dgx'",
    ),
    (
        "node match required",
        change(lambda d: d["clusters"][0]["nodes"][0].pop("match")),
        "clusters[0].nodes[0].match: required",
    ),
    (
        "node key typo",
        change(lambda d: d["clusters"][0]["nodes"][0].update(server="hgx")),
        "clusters[0].nodes[0].server: unknown key (did you mean 'server_type'?",
    ),
    (
        "node match twice",
        change(lambda d: d["clusters"][0]["nodes"].append({"match": "gpu-*", "server_type": "hgx"})),
        "clusters[0].nodes[1].match: 'gpu-*' is already matched at clusters[0].nodes[0]: this one never applies",
    ),
    (
        "new cluster without url",
        change(lambda d: d["clusters"].append({"name": "c2"})),
        "clusters[1].prometheus_url: required: there is no cluster 'c2' yet",
    ),
    (
        "url",
        change(lambda d: d["clusters"][0].update(prometheus_url="prometheus:9090")),
        "clusters[0].prometheus_url: 'prometheus:9090' is not an http(s) URL",
    ),
    (
        "selector braces",
        change(lambda d: d["clusters"][0].update(selector='{cluster="a"}')),
        "clusters[0].selector: label matchers without braces",
    ),
    (
        "scrape interval",
        change(lambda d: d["clusters"][0].update(scrape_interval_s=0)),
        "clusters[0].scrape_interval_s: must be between 1 and 3600, got 0",
    ),
    (
        "dcgm host label",
        change(lambda d: d["clusters"][0].update(dcgm_host_label="host name")),
        "clusters[0].dcgm_host_label:",
    ),
    # teams
    (
        "rule kind",
        change(lambda d: d["teams"][0]["rules"][0].update(kind="slurm_acount")),
        "teams[0].rules[0].kind: expected one of slurm_account, slurm_user, k8s_namespace, user",
    ),
    (
        "rule value required",
        change(lambda d: d["teams"][0]["rules"][0].pop("value")),
        "teams[0].rules[0].value: required",
    ),
    (
        "rule cluster unknown",
        change(lambda d: d["teams"][0]["rules"][0].update(cluster="c9")),
        "teams[0].rules[0].cluster: unknown cluster 'c9'",
    ),
    (
        "rule twice",
        change(lambda d: d["teams"].append({"name": "nlp", "rules": [{"kind": "slurm_account", "value": "vision"}]})),
        "teams[1].rules[0]: slurm_account = 'vision' on every cluster is already a rule at teams[0].rules[0]",
    ),
    (
        "team key typo",
        change(lambda d: d["teams"][0].update(rule=[])),
        "teams[0].rule: unknown key (did you mean 'rules'?",
    ),
    # job groups
    (
        "match kind",
        change(lambda d: d["job_groups"][0].update(match_kind="prefix")),
        "job_groups[0].match_kind: expected one of account, name_prefix, namespace, user",
    ),
    ("match value", change(lambda d: d["job_groups"][0].pop("match_value")), "job_groups[0].match_value: required"),
    (
        "flexible",
        change(lambda d: d["job_groups"][0].update(flexible="yes")),
        "job_groups[0].flexible: expected true or false",
    ),
]


def as_text(document: dict[str, Any] | str) -> str:
    return document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dict[str, Any]]]:
    """The footprint services, recorded instead of run (they are tested with the footprint arithmetic)."""
    recorded: dict[str, list[dict[str, Any]]] = {"footprints_refresh": [], "job_groups_assign": []}
    monkeypatch.setattr(
        services, "footprints_refresh", lambda **kw: recorded["footprints_refresh"].append(kw) or FootprintRefresh(7)
    )
    monkeypatch.setattr(services, "job_groups_assign", lambda **kw: recorded["job_groups_assign"].append(kw) or {})
    return recorded


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row the config writes, every field: equal before and after means nothing was written."""
    models = (Site, ServerType, GpuModel, Cluster, Node, Team, TeamRule, JobGroup)
    return {m.__name__: list(m.objects.order_by("pk").values_list()) for m in models}


@pytest.fixture
def existing(db: None) -> Cluster:
    """What is there before a config is applied: a site and a cluster with nodes (they appear at ingest)."""
    site = Site.objects.create(name="dc-old", grid_zone="FR", pue=1.1, electricity_price_per_kwh=Decimal("0.2"))
    cluster = Cluster.objects.create(name="c1", prometheus_url="http://old:9090", site=site)
    for hostname in ("gpu-01", "gpu-02", "cpu-01"):
        Node.objects.create(cluster=cluster, hostname=hostname)
    return cluster


# --- Validation ---------------------------------------------------------------------------------------


def test_the_base_config_is_valid() -> None:
    config = config_parse(base())
    assert config.sites[0].pue == 1.2
    assert config.clusters[0].nodes == (NodeMatch("gpu-*", "hgx"),)


@pytest.mark.parametrize(("document", "expected"), [(d, e) for _, d, e in BAD], ids=[i for i, _, _ in BAD])
def test_each_rule_names_its_path_and_problem(document: dict[str, Any] | str, expected: str) -> None:
    # when
    with pytest.raises(ConfigError) as raised:
        config_load(as_text(document))
    # then
    assert any(expected in p for p in raised.value.problems), raised.value.problems


@pytest.mark.django_db
@pytest.mark.parametrize(("document", "expected"), [(d, e) for _, d, e in BAD], ids=[i for i, _, _ in BAD])
def test_a_bad_config_writes_nothing(
    document: dict[str, Any] | str, expected: str, existing: Cluster, calls: dict[str, list[Any]], tmp_path: Path
) -> None:
    # given the rest of the file is valid, and would change what exists
    path = tmp_path / "fleet.yaml"
    path.write_text(as_text(document))
    before = snapshot()
    # when
    with pytest.raises(CommandError) as raised:
        call_command("apply_config", str(path))
    # then
    assert expected in str(raised.value)
    assert "Nothing was written." in str(raised.value)
    assert snapshot() == before
    assert calls == {"footprints_refresh": [], "job_groups_assign": []}


def test_every_problem_is_listed_not_just_the_first() -> None:
    # given three independent mistakes in three objects
    doc = base()
    site(doc)["pue_by_month"] = {13: 1.2}
    doc["server_types"][0]["gpus_per_server"] = 0
    doc["job_groups"][0]["flexible"] = "no"
    # when
    with pytest.raises(ConfigError) as raised:
        config_parse(doc)
    # then, in the order of the file
    assert raised.value.problems == [
        "sites[0].pue_by_month.13: not a month (1..12)",
        "server_types[0].gpus_per_server: must be between 1 and 32767, got 0",
        "job_groups[0].flexible: expected true or false, got a string ('no')",
    ]
    assert str(raised.value).startswith("3 problems in the fleet config:")


def test_references_resolve_against_the_database() -> None:
    # given a cluster whose site and server type exist only in the database, and a rule on a stored cluster
    doc = {
        "clusters": [{"name": "c1", "site": "dc-db", "nodes": [{"match": "n*", "server_type": "st-db"}]}],
        "teams": [{"name": "t", "rules": [{"kind": "user", "value": "ada", "cluster": "c2"}]}],
    }
    known = KnownNames(sites=frozenset({"dc-db"}), server_types=frozenset({"st-db"}), clusters=frozenset({"c1", "c2"}))
    # when
    config = config_parse(doc, known=known)
    # then
    assert config.clusters[0].site == "dc-db"
    assert config.teams[0].rules[0].cluster == "c2"
    with pytest.raises(ConfigError, match=r"clusters\[0\].site: unknown site 'dc-db'"):
        config_parse(doc, known=KnownNames(server_types=known.server_types, clusters=known.clusters))


def test_defaults_and_alternatives() -> None:
    doc = {
        "sites": [
            {
                "name": "cloud",
                "grid_zone": "US-CAL-CISO",
                "provider_includes_overhead": True,
                "electricity_price_per_kwh": 0,
            },
            {
                "name": "colo",
                "grid_zone": "FR",
                "pue": 1.3,
                "pue_by_month": {"7": 1.5},
                "electricity_price_per_kwh": 0.2,
            },
        ],
        "server_types": [{"name": "s", "embodied_kg_per_server": 0, "service_life_years": 5, "gpus_per_server": 4}],
        "clusters": [{"name": "default"}],
    }
    config = config_parse(doc, known=KnownNames(default_cluster="default"))
    cloud, colo = config.sites
    assert (cloud.pue, cloud.pue_by_month, cloud.intensity_basis, cloud.currency, cloud.timezone) == (
        1.0, {}, "location", "EUR", "UTC"
    )  # fmt: skip
    assert colo.pue_by_month == {7: 1.5} and colo.pue == 1.3
    assert config.server_types[0].service_life_h == 43800 and config.server_types[0].node_overhead_factor is None
    assert config.clusters[0] == cfg.ClusterConfig(name="default")


def test_choices_agree_with_the_models() -> None:
    assert tuple(Basis.values) == cfg.BASES
    assert tuple(TeamRule.Kind.values) == cfg.RULE_KINDS
    assert tuple(JobGroup.MatchKind.values) == cfg.MATCH_KINDS


def test_first_matching_pattern_wins() -> None:
    patterns = [NodeMatch("gpu-x*", "special"), NodeMatch("gpu-*", "hgx"), NodeMatch("GPU-*", "upper")]
    assert cfg.server_type_for_hostname("gpu-x01", patterns) == "special"
    assert cfg.server_type_for_hostname("gpu-a01", patterns) == "hgx"
    assert cfg.server_type_for_hostname("cpu-01", patterns) is None


# --- Apply --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_demo_fleet_applies_cleanly(calls: dict[str, list[Any]], settings: Any) -> None:
    # given the demo's cluster and nodes, as demo_setup and the first ingest leave them
    cluster = Cluster.objects.create(name="default", prometheus_url="http://127.0.0.1:9090", scrape_interval_s=60)
    for hostname in ("gpu-a01", "gpu-k01", "gpu-x01", "login-01"):
        Node.objects.create(cluster=cluster, hostname=hostname)
    out = _run("apply_config", str(DEMO_FLEET))
    # then
    site = Site.objects.get(name="dc-frankfurt")
    assert (site.grid_zone, site.intensity_basis, site.currency, site.timezone) == (
        "DE",
        "location",
        "EUR",
        "Europe/Berlin",
    )
    assert site.electricity_price_per_kwh == Decimal("0.18")
    assert [site.pue_for_month(m) for m in (1, 7, 12)] == [1.2, 1.35, 1.2]
    server = ServerType.objects.get(name="hgx-h200")
    assert server.node_overhead_factor == 1.3 and server.embodied_kg_per_server == 3000
    assert server.service_life_h == 43800 and server.gpus_per_server == 8
    assert GpuModel.objects.get(name="NVIDIA H200").hourly_rate == Decimal("2.80")
    cluster.refresh_from_db()
    assert cluster.site == site and cluster.scrape_interval_s == 60  # left out: left as it was
    typed = dict(Node.objects.values_list("hostname", "server_type__name"))
    assert typed == {"gpu-a01": "hgx-h200", "gpu-k01": "hgx-h200", "gpu-x01": "hgx-h200", "login-01": None}
    assert sorted(Team.objects.values_list("name", flat=True)) == ["ads", "bio", "nlp", "search", "vision"]
    assert set(TeamRule.objects.values_list("team__name", "kind", "value")) == {
        ("vision", "slurm_account", "vision"), ("nlp", "slurm_account", "nlp"), ("bio", "slurm_account", "bio"),
        ("vision", "k8s_pod_label", "team=vision"), ("nlp", "k8s_pod_label", "team=nlp"),
        ("bio", "k8s_pod_label", "team=bio"),
        ("search", "k8s_namespace", "search"), ("ads", "k8s_namespace", "ads"),
    }  # fmt: skip
    assert set(JobGroup.objects.values_list("name", "flexible")) == {("nlp-pretrain", False), ("sweeps", True)}
    assert line("sites", "1 created, 0 updated, 0 unchanged") in out
    assert line("nodes", "3 given a server type, 0 unchanged, 1 unmatched") in out
    assert list(ServerTypeRule.objects.values_list("cluster__name", "hostname_glob", "server_type__name")) == [
        ("default", "gpu-*", "hgx-h200")
    ]
    assert calls["job_groups_assign"] == [{"cluster_ids": None}]
    assert calls["footprints_refresh"] == [{"cluster_ids": [cluster.id]}]


@pytest.mark.django_db
def test_applying_twice_changes_nothing(existing: Cluster, calls: dict[str, list[Any]], tmp_path: Path) -> None:
    # given the config applied once
    path = tmp_path / "fleet.yaml"
    path.write_text(as_text(base()))
    _run("apply_config", str(path))
    after_first = snapshot()
    first_calls = copy.deepcopy(calls)
    # when it is applied again
    out = _run("apply_config", str(path))
    # then
    assert snapshot() == after_first
    assert calls == first_calls  # nothing to regroup or recompute
    assert "nothing to change" in out
    for kind in ("sites", "server_types", "gpu_models", "clusters", "server_type_rules", "teams", "team_rules"):
        assert line(kind, "0 created, 0 updated, 1 unchanged") in out
    assert line("nodes", "0 given a server type, 2 unchanged, 1 unmatched") in out


@pytest.mark.django_db
def test_apply_reports_and_recomputes_what_changed(existing: Cluster, calls: dict[str, list[Any]]) -> None:
    # given the config applied
    config_apply(config=config_parse(base(), known=known_names_read()))
    calls["footprints_refresh"].clear()
    # when the site's July PUE changes
    doc = base()
    site(doc)["pue_by_month"] = {7: 1.4}
    report = config_apply(config=config_parse(doc, known=known_names_read()))
    # then the site is updated and the cluster at it recomputed
    assert (report.counts["sites"].updated, report.counts["clusters"].unchanged) == (1, 1)
    assert Site.objects.get(name="dc-a").pue_for_month(7) == 1.4
    assert calls["footprints_refresh"] == [{"cluster_ids": [existing.id]}]
    # when only the time zone changes (reports only): updated, nothing recomputed
    site(doc)["timezone"] = "UTC"
    report = config_apply(config=config_parse(doc, known=known_names_read()))
    assert report.counts["sites"].updated == 1 and report.gpu_hours_refreshed is None
    assert len(calls["footprints_refresh"]) == 1


@pytest.mark.django_db
def test_a_dry_run_writes_nothing_and_says_what_it_would_do(
    existing: Cluster, calls: dict[str, list[Any]], tmp_path: Path
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(as_text(base()))
    before = snapshot()
    out = _run("apply_config", str(path), "--dry-run")
    assert snapshot() == before
    assert line("sites", "1 created, 0 updated, 0 unchanged") in out
    assert line("clusters", "0 created, 1 updated, 0 unchanged") in out
    assert "dry run: nothing was written" in out
    assert calls == {"footprints_refresh": [], "job_groups_assign": []}


@pytest.mark.django_db
def test_a_failure_after_writing_rolls_everything_back(existing: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a footprint recomputation that fails
    def fail(**kwargs: Any) -> int:
        raise RuntimeError("refresh failed")

    monkeypatch.setattr(services, "footprints_refresh", fail)
    monkeypatch.setattr(services, "job_groups_assign", lambda **kw: {})
    before = snapshot()
    # when
    with pytest.raises(RuntimeError):
        config_apply(config=config_parse(base(), known=known_names_read()))
    # then the config is not half applied
    assert snapshot() == before


@pytest.mark.django_db
def test_new_default_cluster_takes_the_environment(calls: dict[str, list[Any]], settings: Any) -> None:
    settings.FLEETWATT_CLUSTER = "default"
    settings.FLEETWATT_SCRAPE_INTERVAL_S = 30
    config = config_parse({"clusters": [{"name": "default", "selector": 'cluster="a"'}]}, known=known_names_read())
    config_apply(config=config)
    cluster = Cluster.objects.get(name="default")
    assert (cluster.prometheus_url, cluster.scrape_interval_s, cluster.selector) == (
        settings.FLEETWATT_PROMETHEUS_URL, 30, 'cluster="a"'
    )  # fmt: skip


@pytest.mark.django_db
def test_a_cluster_names_its_dcgm_host_label_and_a_config_without_it_leaves_it(
    calls: dict[str, list[Any]], settings: Any
) -> None:
    settings.FLEETWATT_CLUSTER = "default"
    named = {"clusters": [{"name": "default", "dcgm_host_label": "hostname"}]}
    config_apply(config=config_parse(named, known=known_names_read()))
    assert Cluster.objects.get(name="default").dcgm_host_label == "hostname"
    config_apply(config=config_parse({"clusters": [{"name": "default"}]}, known=known_names_read()))
    assert Cluster.objects.get(name="default").dcgm_host_label == "hostname"  # left out: left as it was
    config_apply(
        config=config_parse({"clusters": [{"name": "default", "dcgm_host_label": ""}]}, known=known_names_read())
    )
    assert Cluster.objects.get(name="default").dcgm_host_label == ""  # empty: Hostname or hostname again


@pytest.mark.django_db
def test_a_rule_moves_to_the_team_the_config_names(existing: Cluster, calls: dict[str, list[Any]]) -> None:
    old = Team.objects.create(name="old")
    TeamRule.objects.create(team=old, kind="slurm_account", value="vision")
    report = config_apply(config=config_parse(base(), known=known_names_read()))
    assert report.counts["team_rules"].updated == 1
    assert TeamRule.objects.get(kind="slurm_account", value="vision").team.name == "vision"


@pytest.mark.django_db
def test_provider_inclusive_site_never_gets_pue(calls: dict[str, list[Any]]) -> None:
    doc = {"sites": [{"name": "cloud", "grid_zone": "DE", "provider_includes_overhead": True, "pue": 1.0,
                      "electricity_price_per_kwh": 0.1}]}  # fmt: skip
    config_apply(config=config_parse(doc))
    cloud = Site.objects.get(name="cloud")
    assert cloud.provider_includes_overhead and cloud.pue == 1.0 and cloud.pue_by_month == {}
    assert {cloud.pue_for_month(m) for m in range(1, 13)} == {1.0}


@pytest.mark.django_db
def test_node_server_types_apply_sets_matching_nodes_only(existing: Cluster) -> None:
    # given a node already typed by hand, and two types
    hgx = ServerType.objects.create(name="hgx")
    other = ServerType.objects.create(name="other")
    Node.objects.filter(hostname="cpu-01").update(server_type=other)
    # given no stored hostname rules: nothing changes
    assert node_server_types_apply(cluster_id=existing.id).updated == 0
    # when the cluster's rules are stored (as apply_config stores them) and applied
    ServerTypeRule.objects.create(cluster=existing, hostname_glob="gpu-0[1]", server_type=other, priority=10)
    ServerTypeRule.objects.create(cluster=existing, hostname_glob="gpu-*", server_type=hgx, priority=20)
    report = node_server_types_apply(cluster_id=existing.id)
    # then
    assert (report.updated, report.unchanged, report.unmatched) == (2, 0, 1)
    assert dict(Node.objects.values_list("hostname", "server_type_id")) == {
        "gpu-01": other.id, "gpu-02": hgx.id, "cpu-01": other.id
    }  # fmt: skip
    again = node_server_types_apply(cluster_id=existing.id)
    assert (again.updated, again.unchanged) == (0, 2)


@pytest.mark.django_db
def test_apply_config_leaves_intensity_alone(existing: Cluster, calls: dict[str, list[Any]], tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(as_text(base()))
    _run("apply_config", str(path))
    assert IntensityHour.objects.count() == 0


@pytest.mark.django_db
def test_node_patterns_are_stored_so_nodes_that_appear_later_get_their_type(
    existing: Cluster, calls: dict[str, list[Any]]
) -> None:
    # given the config applied
    config_apply(config=config_parse(base(), known=known_names_read()))
    # when a node appears at a later ingest, which applies the stored rules to new nodes
    late = Node.objects.create(cluster=existing, hostname="gpu-99")
    services.node_server_types_apply(cluster_id=existing.id, only_unset=True)
    # then
    late.refresh_from_db()
    assert late.server_type is not None and late.server_type.name == "hgx"


@pytest.mark.django_db
def test_a_clusters_node_list_replaces_its_rules_and_leaving_it_out_keeps_them(
    existing: Cluster, calls: dict[str, list[Any]]
) -> None:
    # given two patterns applied
    doc = base()
    doc["server_types"].append({**doc["server_types"][0], "name": "cpu-box"})
    doc["clusters"][0]["nodes"] = [
        {"match": "cpu-*", "server_type": "cpu-box"},
        {"match": "gpu-*", "server_type": "hgx"},
    ]
    config_apply(config=config_parse(doc, known=known_names_read()))
    rules = lambda: list(ServerTypeRule.objects.values_list("hostname_glob", "server_type__name", "priority"))  # noqa: E731
    assert rules() == [("cpu-*", "cpu-box", 10), ("gpu-*", "hgx", 20)]
    # when the list changes: the rules become the new list, in its order
    doc["clusters"][0]["nodes"] = [
        {"match": "gpu-0*", "server_type": "cpu-box"},
        {"match": "gpu-*", "server_type": "hgx"},
    ]
    report = config_apply(config=config_parse(doc, known=known_names_read()))
    assert rules() == [("gpu-0*", "cpu-box", 10), ("gpu-*", "hgx", 20)]
    assert str(report.counts["server_type_rules"]) == "1 created, 0 updated, 1 unchanged, 1 deleted"
    assert set(Node.objects.values_list("hostname", "server_type__name")) == {
        ("gpu-01", "cpu-box"),
        ("gpu-02", "cpu-box"),
        ("cpu-01", "cpu-box"),  # no pattern matches it any more: it keeps its type
    }
    # when a config leaves the cluster's nodes out, its rules stay
    doc["clusters"][0].pop("nodes")
    config_apply(config=config_parse(doc, known=known_names_read()))
    assert len(rules()) == 2


def line(kind: str, text: str) -> str:
    return f"{kind:<17} {text}"


def _run(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()
