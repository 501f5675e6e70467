"""Each section of the fleet config validated into its type (apps/config/sections.py, pure): what a valid element
becomes (its defaults and conversions), and the rules that span keys of one element. Each rule's message through a
whole file is tests/config/test_config.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from apps.carbon.node_types import NodeMatch
from apps.config.fields import Fields, Problems
from apps.config.sections import (
    SITE_KEYS,
    cluster_parse,
    currencies_check,
    gpu_model_parse,
    job_group_parse,
    server_type_parse,
    site_parse,
    sso_parse,
    team_parse,
)
from apps.config.types import (
    HOURS_PER_YEAR,
    TIMEOUT_FROM_SETTINGS,
    GpuModelConfig,
    JobGroupConfig,
    KnownNames,
    ServerTypeConfig,
    ShardConfig,
    TeamRuleConfig,
)
from apps.sso.mapping import GroupRule

KNOWN = KnownNames(clusters=frozenset({"old"}), teams=frozenset({"ops"}), server_types=frozenset({"dgx"}))


def _f(raw: dict[str, Any], path: str = "x[0]") -> Fields:
    return Fields(raw, path, Problems(), tuple(raw))


def _cluster(raw: dict[str, Any], *, known: KnownNames = KNOWN) -> tuple[Any, list[str]]:
    f = _f({"name": "c1", "prometheus_url": "http://prometheus:9090", **raw}, "clusters[0]")
    config = cluster_parse(f, known=known, sites={"dc-a"}, server_types={"hgx"}, problems=f.problems)
    return config, f.problems.items


# sites


def test_a_site_with_its_defaults() -> None:
    f = _f({"name": "dc-a", "grid_zone": "DE", "pue": 1.2, "electricity_price_per_kwh": 0.18})
    site = site_parse(f)
    assert site is not None and not f.problems.items
    assert (site.intensity_basis, site.currency, site.timezone, site.provider_includes_overhead) == (
        "location", "EUR", "UTC", False,
    )  # fmt: skip
    assert site.electricity_price_per_kwh == Decimal("0.18") and site.pue_by_month == {}


def test_a_sites_monthly_pue_is_by_month_number_in_order() -> None:
    months: dict[object, float] = {str(m): 1.1 + m / 100 for m in range(12, 0, -1)}
    f = _f({"name": "dc-a", "grid_zone": "DE", "pue_by_month": months, "electricity_price_per_kwh": 0})
    site = site_parse(f)
    assert site is not None and not f.problems.items
    assert list(site.pue_by_month) == list(range(1, 13)) and site.pue_by_month[7] == pytest.approx(1.17)
    assert site.pue == 1.0  # not given: each month has its own


def test_a_provider_inclusive_site_has_no_pue_at_all() -> None:
    f = _f({"name": "dc-a", "grid_zone": "DE", "provider_includes_overhead": True, "pue": 1.0,
            "pue_by_month": {1: 1.0}, "electricity_price_per_kwh": 0})  # fmt: skip
    site = site_parse(f)
    assert site is not None and (site.pue, site.pue_by_month) == (1.0, {})


def test_a_site_with_a_problem_is_not_returned() -> None:
    f = _f({"name": "dc-a", "grid_zone": "DE", "pue": 1.2, "electricity_price_per_kwh": 0.1, "timezone": "Mars/Base"})
    assert site_parse(f) is None
    assert f.problems.items == ["x[0].timezone: 'Mars/Base' is not an IANA time zone (e.g. Europe/Berlin, UTC)"]


def test_the_site_keys_are_what_a_site_reads() -> None:
    assert set(SITE_KEYS) == {
        "name", "grid_zone", "intensity_basis", "pue", "pue_by_month", "provider_includes_overhead",
        "electricity_price_per_kwh", "currency", "timezone",
    }  # fmt: skip


# server types, GPU models, job groups


def test_a_service_life_in_years_is_hours() -> None:
    f = _f({"name": "hgx", "embodied_kg_per_server": 3000, "service_life_years": 5, "gpus_per_server": 8})
    assert server_type_parse(f) == ServerTypeConfig(
        name="hgx", node_overhead_factor=None, embodied_kg_per_server=3000.0,
        service_life_h=5 * HOURS_PER_YEAR, gpus_per_server=8,
    )  # fmt: skip


def test_a_service_life_is_given_one_way_only() -> None:
    both = _f({"name": "hgx", "embodied_kg_per_server": 0, "service_life_years": 5, "service_life_h": 1,
               "gpus_per_server": 8})  # fmt: skip
    neither = _f({"name": "hgx", "embodied_kg_per_server": 0, "gpus_per_server": 8})
    assert server_type_parse(both) is None and server_type_parse(neither) is None
    assert both.problems.items == ["x[0].service_life_h: give service_life_h or service_life_years, not both"]
    assert neither.problems.items == ["x[0].service_life_h: required (or service_life_years)"]


def test_a_null_overhead_is_not_measured() -> None:
    f = _f({"name": "hgx", "node_overhead_factor": None, "embodied_kg_per_server": 0, "service_life_h": 1,
            "gpus_per_server": 8})  # fmt: skip
    parsed = server_type_parse(f)
    assert parsed is not None and parsed.node_overhead_factor is None


def test_a_gpu_model_and_a_job_group() -> None:
    assert gpu_model_parse(_f({"name": "NVIDIA H200", "hourly_rate": 2.8, "tdp_w": 700})) == GpuModelConfig(
        name="NVIDIA H200", hourly_rate=Decimal("2.8"), currency="EUR", tdp_w=700.0
    )
    assert job_group_parse(_f({"name": "sweeps", "match_kind": "user", "match_value": "ada"})) == JobGroupConfig(
        name="sweeps", match_kind="user", match_value="ada", flexible=False
    )
    assert gpu_model_parse(_f({"name": "A100", "hourly_rate": 1, "tdp_w": 0})) is None


# clusters


def test_a_cluster_leaves_alone_what_it_does_not_name() -> None:
    config, problems = _cluster({})
    assert not problems
    assert (config.selector, config.site, config.nodes, config.shards, config.scheduler) == (None,) * 5
    assert config.work_counters_given is False and config.prometheus_timeout_s is None


def test_a_new_cluster_needs_its_url_unless_it_is_known_or_the_default() -> None:
    _, problems = _cluster({"name": "new", "prometheus_url": None})
    assert "clusters[0].prometheus_url: expected a string, got nothing (null)" in problems
    f = _f({"name": "new"}, "clusters[0]")
    cluster_parse(f, known=KNOWN, sites=set(), server_types=set(), problems=f.problems)
    assert f.problems.items == ["clusters[0].prometheus_url: required: there is no cluster 'new' yet"]
    for known in (KNOWN, KnownNames(default_cluster="default")):
        name = "old" if known is KNOWN else "default"
        g = _f({"name": name}, "clusters[0]")
        assert cluster_parse(g, known=known, sites=set(), server_types=set(), problems=g.problems) is not None


def test_a_clusters_hostname_rules_in_order_and_an_empty_list_clears_them() -> None:
    config, problems = _cluster(
        {"site": "dc-a", "nodes": [{"match": "gpu-d*", "server_type": "dgx"}, {"match": "gpu-*", "server_type": "hgx"}]}
    )
    assert not problems
    assert config.nodes == (NodeMatch("gpu-d*", "dgx"), NodeMatch("gpu-*", "hgx")) and config.site == "dc-a"
    cleared, _ = _cluster({"nodes": []})
    assert cleared.nodes == ()


def test_a_glob_matched_twice_never_applies_the_second_time() -> None:
    _, problems = _cluster(
        {"nodes": [{"match": "gpu-*", "server_type": "hgx"}, {"match": "gpu-*", "server_type": "dgx"}]}
    )
    assert problems == ["clusters[0].nodes[1].match: 'gpu-*' is already matched at clusters[0].nodes[0]: this one "
                        "never applies"]  # fmt: skip


def test_shards_are_named_once_and_never_by_a_reserved_name() -> None:
    config, problems = _cluster({"shards": [{"name": "a", "nodes": "gpu-a.*"}]})
    assert config.shards == (ShardConfig(name="a", nodes="gpu-a.*"),) and not problems
    _, problems = _cluster(
        {"shards": [{"name": "a", "nodes": "gpu-a.*"}, {"name": "a", "nodes": "x"}, {"name": "rest", "nodes": "y"},
                    {"name": "b", "nodes": "(?=gpu)"}]}
    )  # fmt: skip
    assert problems[0] == "clusters[0].shards[1].name: 'a' is named twice"
    assert problems[1].startswith("clusters[0].shards[2].name: 'rest' is reserved")
    assert problems[2].startswith("clusters[0].shards[3].nodes: ")
    none, _ = _cluster({"shards": []})
    assert none.shards == ()


def test_the_endpoint_keys_given_and_a_null_timeout_back_to_the_settings() -> None:
    config, problems = _cluster(
        {"prometheus_bearer_token_env": "PROM_TOKEN", "prometheus_headers": {"X-Scope-OrgID": "fleet"},
         "prometheus_timeout_s": None, "prometheus_ca_file": ""}
    )  # fmt: skip
    assert not problems
    assert config.prometheus_bearer_token_env == "PROM_TOKEN"
    assert config.prometheus_headers == {"X-Scope-OrgID": "fleet"}
    assert config.prometheus_timeout_s == TIMEOUT_FROM_SETTINGS and config.prometheus_ca_file == ""


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"selector": '{cluster="a"}'}, 'clusters[0].selector: label matchers without braces, e.g. cluster="a"'),
        ({"prometheus_url": "prometheus:9090"}, "is not an http(s) URL"),
        ({"prometheus_timeout_s": 601}, "clusters[0].prometheus_timeout_s: at most 600 seconds, got 601"),
        ({"prometheus_timeout_s": 0}, "clusters[0].prometheus_timeout_s: must be greater than 0"),
        (
            {"prometheus_bearer_token_env": "T", "prometheus_basic_auth_user": "u"},
            "clusters[0].prometheus_basic_auth_user: give prometheus_bearer_token_env or basic auth, not both",
        ),
        ({"slurmrest_token_env": "eyJhbGciOi.x.y"}, "the NAME of an environment variable (e.g. SLURM_JWT)"),
        ({"scheduler": "pbs"}, "clusters[0].scheduler: expected one of slurm_sacct, slurm_rest, kube_state_metrics"),
        ({"site": "dc-z"}, "clusters[0].site: unknown site 'dc-z'"),
    ],
)
def test_a_clusters_rules(raw: dict[str, Any], problem: str) -> None:
    config, problems = _cluster(raw)
    assert config is None
    assert any(problem in p for p in problems), problems


def test_a_scheduler_of_null_or_empty_is_not_read() -> None:
    assert _cluster({"scheduler": None})[0].scheduler == ""
    assert _cluster({"scheduler": ""})[0].scheduler == ""
    assert _cluster({"scheduler": "slurm_sacct"})[0].scheduler == "slurm_sacct"


# teams


def test_a_teams_rules_with_their_default_priority_and_a_rule_given_twice_across_teams() -> None:
    seen: dict[tuple[str | None, str, str], str] = {}
    problems = Problems()
    vision_rules = [
        {"kind": "slurm_account", "value": "v"},
        {"kind": "slurm_user", "value": "ada", "cluster": "old", "priority": 5},
    ]
    first = Fields({"name": "vision", "rules": vision_rules}, "teams[0]", problems, ("name", "rules"))
    nlp_rules = [{"kind": "slurm_account", "value": "v"}]
    second = Fields({"name": "nlp", "rules": nlp_rules}, "teams[1]", problems, ("name", "rules"))
    vision = team_parse(first, clusters=set(), known=KNOWN, problems=problems, rule_seen=seen)
    team_parse(second, clusters=set(), known=KNOWN, problems=problems, rule_seen=seen)
    assert vision is not None and vision.rules == (
        TeamRuleConfig(kind="slurm_account", value="v", cluster=None, priority=100),
        TeamRuleConfig(kind="slurm_user", value="ada", cluster="old", priority=5),
    )
    assert problems.items == [
        "teams[1].rules[0]: slurm_account = 'v' on every cluster is already a rule at teams[0].rules[0]"
    ]


def test_a_pod_label_rule_is_name_equals_value() -> None:
    problems = Problems()
    f = Fields({"name": "ml", "rules": [{"kind": "k8s_pod_label", "value": "team"}]}, "teams[0]", problems,
               ("name", "rules"))  # fmt: skip
    assert team_parse(f, clusters=set(), known=KNOWN, problems=problems, rule_seen={}) is None
    assert problems.items == ["teams[0].rules[0].value: 'team' is not name=value (a pod label and its value)"]


# sso


def test_the_sso_section_and_its_default_claim() -> None:
    problems = Problems()
    sso = sso_parse(
        {"map": [{"group": "ml", "role": "lead", "team": "vision"}, {"group": "money", "role": "finance"}]},
        teams={"vision"}, known=KNOWN, problems=problems,
    )  # fmt: skip
    assert sso is not None and sso.groups_claim == "groups" and not problems.items
    assert sso.rules == (GroupRule("ml", "lead", "vision"), GroupRule("money", "finance", None))


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"group": "ml", "role": "member"}, "sso.map[0].team: required: role 'member' is a membership of one team"),
        ({"group": "ml", "role": "admin", "team": "ops"}, "sso.map[0].team: role 'admin' is fleet-wide"),
        ({"group": "ml", "role": "owner", "team": "ops"}, "sso.map[0].role: expected one of member, lead, finance"),
        ({"group": "ml", "role": "lead", "team": "nobody"}, "sso.map[0].team: unknown team 'nobody'"),
    ],
)
def test_an_sso_rules_problems(rule: dict[str, Any], problem: str) -> None:
    problems = Problems()
    assert sso_parse({"map": [rule]}, teams=set(), known=KNOWN, problems=problems) is None
    assert any(p.startswith(problem) for p in problems.items), problems.items


def test_a_group_mapped_twice_to_one_team_is_named() -> None:
    problems = Problems()
    rules = [{"group": "ml", "role": "member", "team": "ops"}, {"group": "ml", "role": "lead", "team": "ops"}]
    assert sso_parse({"map": rules}, teams=set(), known=KNOWN, problems=problems) is None
    assert problems.items == ["sso.map[1]: group 'ml' is already mapped to 'ops' at sso.map[0]"]


# currencies


def test_one_config_uses_one_currency() -> None:
    problems = Problems()
    sites = [("sites[0]", {"currency": "EUR"}), ("sites[1]", {})]  # EUR by default
    models = [("gpu_models[0]", {"currency": "USD"}), ("gpu_models[1]", {"currency": "bad"}), ("gpu_models[2]", 3)]
    currencies_check(sites, models, problems)
    assert len(problems.items) == 1
    assert problems.items[0].startswith("gpu_models[0].currency: USD differs from EUR at sites[0]")
