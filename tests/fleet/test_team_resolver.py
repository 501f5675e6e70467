"""A job's team from the team rules (apps.fleet.selectors.TeamResolver), and the rows that need it."""

from __future__ import annotations

import pytest

from apps.fleet.models import Cluster, Team, TeamRule
from apps.fleet.selectors import JobIdentity, TeamResolver
from apps.fleet.services import default_cluster_ensure, unassigned_team_ensure

pytestmark = pytest.mark.django_db


def _job(scheduler: str = "slurm", user: str = "", account: str = "", namespace: str = "") -> JobIdentity:
    return JobIdentity(scheduler=scheduler, user=user, account=account, namespace=namespace)


@pytest.fixture
def clusters() -> tuple[Cluster, Cluster]:
    return (
        Cluster.objects.create(name="a", prometheus_url="http://127.0.0.1:9"),
        Cluster.objects.create(name="b", prometheus_url="http://127.0.0.1:9"),
    )


def test_the_first_rule_by_priority_that_matches_decides(clusters: tuple[Cluster, Cluster]) -> None:
    # given two teams whose rules both match a job, one ranked first
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    TeamRule.objects.create(team=nlp, kind=TeamRule.Kind.SLURM_USER, value="ada", priority=50)
    TeamRule.objects.create(team=vision, kind=TeamRule.Kind.SLURM_ACCOUNT, value="vision", priority=10)
    resolver = TeamResolver(cluster=clusters[0], unassigned=unassigned_team_ensure())
    # then
    assert resolver.team_for(_job(user="ada", account="vision")) == vision
    assert resolver.team_for(_job(user="ada", account="other")) == nlp


def test_rules_of_another_cluster_do_not_apply(clusters: tuple[Cluster, Cluster]) -> None:
    search = Team.objects.create(name="search")
    TeamRule.objects.create(team=search, kind=TeamRule.Kind.K8S_NAMESPACE, value="search", cluster=clusters[1])
    job = _job(scheduler="k8s", namespace="search")
    assert TeamResolver(cluster=clusters[1], unassigned=unassigned_team_ensure()).team_for(job) == search
    unassigned = TeamResolver(cluster=clusters[0], unassigned=unassigned_team_ensure()).team_for(job)
    assert unassigned.name == Team.UNASSIGNED


@pytest.mark.parametrize(
    ("kind", "job", "matches"),
    [
        (TeamRule.Kind.SLURM_ACCOUNT, _job(account="x"), True),
        (TeamRule.Kind.SLURM_ACCOUNT, _job(scheduler="k8s", account="x"), False),
        (TeamRule.Kind.SLURM_USER, _job(user="x"), True),
        (TeamRule.Kind.K8S_NAMESPACE, _job(scheduler="k8s", namespace="x"), True),
        (TeamRule.Kind.K8S_NAMESPACE, _job(namespace="x"), False),
        (TeamRule.Kind.USER, _job(scheduler="container", user="x"), True),
        (TeamRule.Kind.USER, _job(scheduler="container"), False),
    ],
)
def test_each_rule_kind_looks_at_its_own_field(
    clusters: tuple[Cluster, Cluster], kind: str, job: JobIdentity, matches: bool
) -> None:
    team = Team.objects.create(name="t")
    rule = TeamRule(team=team, kind=kind, value="x", priority=1, id=1)
    resolver = TeamResolver(cluster=clusters[0], unassigned=unassigned_team_ensure(), rules=[rule])
    assert (resolver.team_for(job) == team) == matches


def test_the_default_cluster_comes_from_the_settings_once(settings) -> None:
    settings.FLEETWATT_CLUSTER, settings.FLEETWATT_PROMETHEUS_URL = "main", "http://prom:9090"
    first = default_cluster_ensure()
    settings.FLEETWATT_PROMETHEUS_URL = "http://elsewhere:9090"  # a later change does not move it
    assert default_cluster_ensure() == first
    assert Cluster.objects.get(name="main").prometheus_url == "http://prom:9090"
