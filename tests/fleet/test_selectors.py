"""Reads of the fleet (apps/fleet/selectors.py): a `k8s_pod_label` rule's name and value, and a job's team from the
rules, the first by priority that matches, each kind looking at its own scheduler's field. With the rules from the
database per cluster: tests/fleet/test_team_resolver.py."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from apps.fleet.models import Cluster, Team, TeamRule
from apps.fleet.selectors import JobIdentity, TeamResolver, pod_label_rule_parse

UNASSIGNED = Team(name="unassigned")
VISION, NLP = Team(name="vision"), Team(name="nlp")


def _resolver(*rules: tuple[str, str, Team, int]) -> TeamResolver:
    made = [TeamRule(kind=k, value=v, team=t, priority=p) for k, v, t, p in rules]
    return TeamResolver(cluster=Cluster(name="c"), unassigned=UNASSIGNED, rules=made)


def _slurm(user: str = "ada", account: str = "") -> JobIdentity:
    return JobIdentity(scheduler="slurm", user=user, account=account, namespace="")


def _pod(namespace: str = "", labels: dict[str, str] | None = None, user: str = "") -> JobIdentity:
    return JobIdentity(
        scheduler="k8s", user=user, account="", namespace=namespace, labels=MappingProxyType(labels or {})
    )


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("team=vision", ("team", "vision")),
        (" team = vision ", ("team", "vision")),
        ("app.kubernetes.io/team=a=b", ("app.kubernetes.io/team", "a=b")),  # split at the first =
        ("team=", None),  # Prometheus keeps no label with an empty value
        ("=vision", None),
        ("team", None),
        ("", None),
    ],
)
def test_a_pod_label_rule_is_a_name_and_a_value(value: str, parsed: tuple[str, str] | None) -> None:
    assert pod_label_rule_parse(value) == parsed


def test_the_first_rule_by_priority_decides_whatever_the_order_given() -> None:
    resolver = _resolver(("user", "ada", NLP, 50), ("slurm_account", "vision", VISION, 10))
    assert resolver.team_for(_slurm(user="ada", account="vision")) is VISION
    assert resolver.team_for(_slurm(user="ada", account="other")) is NLP


def test_no_rule_matching_is_the_unassigned_team() -> None:
    assert _resolver(("user", "ada", NLP, 50)).team_for(_slurm(user="grace")) is UNASSIGNED
    assert _resolver().team_for(_slurm()) is UNASSIGNED


def test_slurm_rules_never_match_a_pod_and_kubernetes_rules_never_a_slurm_job() -> None:
    resolver = _resolver(("slurm_user", "ada", VISION, 10), ("k8s_namespace", "ml", NLP, 20))
    assert resolver.team_for(_pod(namespace="ml", user="ada")) is NLP
    assert resolver.team_for(JobIdentity(scheduler="slurm", user="x", account="", namespace="ml")) is UNASSIGNED


def test_a_user_rule_matches_any_scheduler_but_never_an_empty_user() -> None:
    resolver = _resolver(("user", "", VISION, 10), ("user", "ada", NLP, 20))
    assert resolver.team_for(_pod(user="ada")) is NLP
    assert resolver.team_for(_slurm(user="ada")) is NLP
    assert resolver.team_for(_slurm(user="")) is UNASSIGNED


def test_a_pod_label_rule_needs_the_pods_label_with_that_value() -> None:
    resolver = _resolver(("k8s_pod_label", "team=vision", VISION, 10), ("k8s_pod_label", "broken", NLP, 5))
    assert resolver.team_for(_pod(labels={"team": "vision"})) is VISION
    assert resolver.team_for(_pod(labels={"team": "nlp"})) is UNASSIGNED
    assert resolver.team_for(_pod()) is UNASSIGNED  # the agent's identity carries no labels


def test_an_identity_is_a_value_its_labels_left_out_of_its_hash() -> None:
    a, b = _pod(namespace="ml", labels={"team": "x"}), _pod(namespace="ml", labels={"team": "y"})
    assert hash(a) == hash(b) and a != b
    assert _slurm() == _slurm()
