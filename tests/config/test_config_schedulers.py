"""The fleet config's scheduler parts: a cluster's `scheduler` (kube_state_metrics among them), the
`k8s_pod_label` team rule and the `group_key` job group; parsed, refused with their path, and applied."""

from __future__ import annotations

from typing import Any

import pytest

from apps.carbon.models import JobGroup
from apps.config import types as cfg
from apps.config.parse import config_parse
from apps.config.selectors import known_names_read
from apps.config.types import ConfigError, KnownNames
from apps.fleet.models import Cluster, TeamRule
from apps.pipeline.inputs import config_apply

KNOWN = KnownNames(clusters=frozenset({"k8s"}))


def test_the_choices_agree_with_the_models() -> None:
    assert tuple(Cluster.Scheduler.values) == cfg.SCHEDULERS
    assert "k8s_pod_label" in cfg.RULE_KINDS and "group_key" in cfg.MATCH_KINDS


@pytest.mark.parametrize(
    ("given", "parsed"),
    [({}, None), ({"scheduler": "kube_state_metrics"}, "kube_state_metrics"), ({"scheduler": "slurm_sacct"},
     "slurm_sacct"), ({"scheduler": ""}, ""), ({"scheduler": None}, "")],
    ids=["left-out", "kubernetes", "slurm", "empty", "null"],
)  # fmt: skip
def test_a_cluster_names_its_scheduler_or_leaves_it_as_stored(given: dict[str, Any], parsed: str | None) -> None:
    config = config_parse({"clusters": [{"name": "k8s", **given}]}, known=KNOWN)
    assert config.clusters[0].scheduler == parsed


def test_kubernetes_rules_and_groups_are_read() -> None:
    config = config_parse(
        {
            "teams": [{"name": "search", "rules": [{"kind": "k8s_pod_label", "value": "team=search"}]}],
            "job_groups": [{"name": "train-1", "match_kind": "group_key", "match_value": "k8s/search/Job/train-1"}],
        }
    )
    assert (config.teams[0].rules[0].kind, config.teams[0].rules[0].value) == ("k8s_pod_label", "team=search")
    assert (config.job_groups[0].match_kind, config.job_groups[0].match_value) == (
        "group_key", "k8s/search/Job/train-1"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (
            {"clusters": [{"name": "k8s", "scheduler": "kubernetes"}]},
            'clusters[0].scheduler: expected one of slurm_sacct, slurm_rest, kube_state_metrics or "" (not read), '
            "got a string ('kubernetes')",
        ),
        (
            {"teams": [{"name": "t", "rules": [{"kind": "k8s_pod_label", "value": "team"}]}]},
            "teams[0].rules[0].value: 'team' is not name=value (a pod label and its value)",
        ),
        (
            {"teams": [{"name": "t", "rules": [{"kind": "k8s_pod_label", "value": "team="}]}]},
            "teams[0].rules[0].value: 'team=' is not name=value",
        ),
        (
            {"teams": [{"name": "t", "rules": [{"kind": "k8s_pod_label", "value": "=search"}]}]},
            "teams[0].rules[0].value: '=search' is not name=value",
        ),
        (
            {"job_groups": [{"name": "g", "match_kind": "owner", "match_value": "x"}]},
            "job_groups[0].match_kind: expected one of account, name_prefix, namespace, user, group_key",
        ),
    ],
    ids=["unknown-scheduler", "label-without-value", "empty-value", "empty-name", "unknown-match-kind"],
)
def test_a_wrong_scheduler_part_names_its_path(document: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_parse(document, known=KNOWN)
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems


@pytest.mark.django_db
def test_applying_sets_the_scheduler_and_leaving_it_out_keeps_it() -> None:
    # given a Slurm cluster
    Cluster.objects.create(name="k8s", prometheus_url="http://prom:9090", scheduler=Cluster.Scheduler.SLURM_SACCT)
    document = {
        "clusters": [{"name": "k8s", "scheduler": "kube_state_metrics"}],
        "teams": [{"name": "search", "rules": [{"kind": "k8s_pod_label", "value": "team=search", "cluster": "k8s"}]}],
        "job_groups": [{"name": "train-1", "match_kind": "group_key", "match_value": "k8s/search/Job/train-1"}],
    }
    # when the config says it is Kubernetes
    config_apply(config=config_parse(document, known=known_names_read()))
    # then
    assert Cluster.objects.get(name="k8s").scheduler == Cluster.Scheduler.KUBERNETES
    rule = TeamRule.objects.get(kind=TeamRule.Kind.K8S_POD_LABEL)
    assert (rule.value, rule.team.name, rule.cluster.name) == ("team=search", "search", "k8s")
    assert JobGroup.objects.get(name="train-1").match_kind == JobGroup.MatchKind.GROUP_KEY
    # and a later config without a scheduler leaves it as it is
    config_apply(config=config_parse({"clusters": [{"name": "k8s", "selector": 'cluster="k"'}]},
                                     known=known_names_read()))  # fmt: skip
    assert Cluster.objects.get(name="k8s").scheduler == Cluster.Scheduler.KUBERNETES


@pytest.mark.django_db
def test_how_to_reach_slurm_is_set_from_the_file_and_a_token_never_is() -> None:
    # given a cluster whose accounting comes from slurmrestd, with pods beside it
    document = {
        "clusters": [
            {
                "name": "hpc",
                "prometheus_url": "http://prom:9090",
                "scheduler": "slurm_rest",
                "kube_pods": True,
                "slurmrest_url": "http://slurm-ctl:6820",
                "slurmrest_token_env": "SLURM_JWT",
                "slurmrest_user": "fleetwatt",
                "sacct_command": "/usr/bin/sacct --cluster hpc",
            }
        ]
    }
    # when applied
    config_apply(config=config_parse(document, known=known_names_read()))
    # then every field is the file's
    cluster = Cluster.objects.get(name="hpc")
    assert (cluster.scheduler, cluster.kube_pods, cluster.slurmrest_url, cluster.slurmrest_token_env) == (
        "slurm_rest", True, "http://slurm-ctl:6820", "SLURM_JWT"
    )  # fmt: skip
    assert (cluster.slurmrest_user, cluster.sacct_command) == ("fleetwatt", "/usr/bin/sacct --cluster hpc")
    assert cluster.scheduler_sources() == ["slurm_rest", "kube_state_metrics"]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("slurmrest_token_env", "eyJhbGciOiJIUzI1NiJ9.e30.x", "the NAME of an environment variable"),
        ("slurmrest_url", "slurm-ctl:6820", "is not an http(s) URL"),
        ("kube_pods", "yes", "expected true or false"),
    ],
    ids=["a-token-itself", "url-without-scheme", "not-a-boolean"],
)
def test_a_wrong_way_to_reach_the_scheduler_names_its_path(field: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_parse({"clusters": [{"name": "k8s", field: value}]}, known=KNOWN)
    assert any(p.startswith(f"clusters[0].{field}: ") and problem in p for p in raised.value.problems), (
        raised.value.problems
    )
