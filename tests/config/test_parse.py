"""The fleet config file read whole (apps/config/parse.py, pure): the YAML refused before it is built when too big or
when its anchors expand too far, a key given twice, every problem of the document in the file's order, and nothing
returned unless there is none. Each section's rules are tests/config/test_sections.py and tests/config/test_config.py.
"""

from __future__ import annotations

import pytest

from apps.config.parse import CONFIG_MAX_BYTES, config_load, config_parse
from apps.config.types import ConfigError, FleetConfig, KnownNames

VALID = """
version: 1
sites:
  - {name: dc-a, grid_zone: DE, pue: 1.2, electricity_price_per_kwh: 0.18}
server_types:
  - {name: hgx, embodied_kg_per_server: 3000, service_life_years: 5, gpus_per_server: 8}
gpu_models:
  - {name: NVIDIA H200, hourly_rate: 2.8, tdp_w: 700}
clusters:
  - name: c1
    prometheus_url: http://prometheus:9090
    site: dc-a
    nodes: [{match: "gpu-*", server_type: hgx}]
teams:
  - {name: vision, rules: [{kind: slurm_account, value: vision, cluster: c1}]}
job_groups:
  - {name: sweeps, match_kind: name_prefix, match_value: sweep-, flexible: true}
sso:
  map: [{group: ml, role: member, team: vision}]
"""


def _problems(text: str, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        config_load(text, **kwargs)  # type: ignore[arg-type]
    return caught.value.problems


def test_a_valid_file_gives_every_section_with_references_resolved_in_the_file() -> None:
    config = config_load(VALID)
    assert [s.name for s in config.sites] == ["dc-a"]
    assert config.clusters[0].site == "dc-a" and config.clusters[0].nodes[0].server_type == "hgx"
    assert config.teams[0].rules[0].cluster == "c1"
    assert config.sso is not None and config.sso.rules[0].team == "vision"
    assert config.job_groups[0].flexible is True


def test_an_empty_mapping_is_a_config_of_nothing_and_without_sso_the_stored_one_stays() -> None:
    assert config_load("{}") == FleetConfig()
    assert config_load("version: 1\n").sso is None


def test_references_to_what_the_database_holds() -> None:
    text = "teams:\n  - {name: nlp, rules: [{kind: slurm_user, value: ada, cluster: prod}]}\n"
    assert _problems(text)[0].startswith("teams[0].rules[0].cluster: unknown cluster 'prod'")
    config = config_load(text, known=KnownNames(clusters=frozenset({"prod"})))
    assert config.teams[0].rules[0].cluster == "prod"


def test_a_key_given_twice_is_refused_with_its_place() -> None:
    assert _problems("version: 1\nversion: 1\n") == ["line 2, column 1: not valid YAML: duplicate key 'version'"]


def test_a_merge_key_is_not_a_key_given_twice() -> None:
    text = "sites:\n  - &a {name: dc-a, grid_zone: DE, pue: 1.2, electricity_price_per_kwh: 0.1}\n"
    text += "  - {<<: *a, name: dc-b}\n"
    assert [s.name for s in config_load(text).sites] == ["dc-a", "dc-b"]


def test_a_file_over_the_size_limit_is_refused_unread() -> None:
    assert _problems("version: 1\n# " + "x" * 100, max_bytes=50) == ["(document): 113 bytes; a config is at most 50"]
    assert CONFIG_MAX_BYTES == 2 * 1024 * 1024


def test_anchors_that_expand_past_the_limit_are_refused_before_they_are_built() -> None:
    # given nine levels of ten aliases each: a billion strings once expanded, a few hundred bytes written
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for n in range(1, 10):
        lines.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]")
    # then
    [problem] = _problems("\n".join(lines) + "\n")
    assert problem.startswith("(document): ") and "YAML nodes once its anchors are expanded; at most 200,000" in problem


def test_not_yaml_names_its_line_and_column() -> None:
    [problem] = _problems("sites: [\n  {name: a\n")
    assert problem.startswith("line 3, column 1: not valid YAML")


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (None, "(document): the file is empty"),
        (["sites"], "(document): expected a mapping with sites, server_types, gpu_models, clusters, teams, job_groups"),
        ("text", "(document): expected a mapping"),
    ],
)
def test_what_is_no_config_at_all(document: object, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_parse(document)
    assert caught.value.problems[0].startswith(problem)


def test_problems_are_listed_in_the_files_order_whatever_order_they_were_found_in() -> None:
    # given problems in job_groups, clusters, sites and at the top, and a currency that differs
    document = {
        "job_groups": [{"name": "g", "match_kind": "colour", "match_value": "x"}],
        "clusters": [{"name": "c 1", "prometheus_url": "http://p:9090"}],
        "sites": [
            {"name": "a", "grid_zone": "DE", "pue": 1.2, "electricity_price_per_kwh": 0.1},
            {"name": "b", "grid_zone": "DE", "pue": 0.5, "electricity_price_per_kwh": 0.1, "currency": "USD"},
        ],
        "version": 7,
    }
    with pytest.raises(ConfigError) as caught:
        config_parse(document)
    # then the top first, then each section in the file's own order of sections, each element's problems together
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "version",
        "sites[1].pue",
        "sites[1].currency",
        "clusters[0].name",
        "job_groups[0].match_kind",
    ]


def test_nothing_is_returned_when_one_element_is_wrong() -> None:
    # a config is applied whole or not at all: one wrong site, and the valid parts are not returned either
    with pytest.raises(ConfigError):
        config_load(VALID.replace("pue: 1.2", "pue: 0.2"))
