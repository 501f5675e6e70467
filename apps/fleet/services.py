"""Writes to the fleet: the default cluster from settings, and a job's team from the rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q

from .models import Cluster, Team, TeamRule


def default_cluster_ensure() -> Cluster:
    """The cluster named by FLEETWATT_CLUSTER, pointing at FLEETWATT_PROMETHEUS_URL, created on first use."""
    cluster, _ = Cluster.objects.get_or_create(
        name=settings.FLEETWATT_CLUSTER,
        defaults={
            "prometheus_url": settings.FLEETWATT_PROMETHEUS_URL,
            "scrape_interval_s": settings.FLEETWATT_SCRAPE_INTERVAL_S,
        },
    )
    return cluster


def unassigned_team_ensure() -> Team:
    team, _ = Team.objects.get_or_create(name=Team.UNASSIGNED, defaults={"display_name": "Unassigned"})
    return team


@dataclass(frozen=True)
class JobIdentity:
    """What the rules look at."""

    scheduler: str
    user: str
    account: str
    namespace: str


def _rule_matches(rule: TeamRule, identity: JobIdentity) -> bool:
    match rule.kind:
        case TeamRule.Kind.SLURM_ACCOUNT:
            return identity.scheduler == "slurm" and identity.account == rule.value
        case TeamRule.Kind.SLURM_USER:
            return identity.scheduler == "slurm" and identity.user == rule.value
        case TeamRule.Kind.K8S_NAMESPACE:
            return identity.scheduler == "k8s" and identity.namespace == rule.value
        case TeamRule.Kind.USER:
            return bool(identity.user) and identity.user == rule.value
    return False


class TeamResolver:
    """Resolves many jobs of one cluster against the rules, loaded once."""

    def __init__(self, *, cluster: Cluster, rules: Iterable[TeamRule] | None = None) -> None:
        if rules is None:
            rules = TeamRule.objects.filter(Q(cluster=cluster) | Q(cluster__isnull=True)).select_related("team")
        self._rules = sorted(rules, key=lambda r: (r.priority, r.id or 0))
        self._unassigned: Team | None = None

    def team_for(self, identity: JobIdentity) -> Team:
        for rule in self._rules:
            if _rule_matches(rule, identity):
                return rule.team
        if self._unassigned is None:
            self._unassigned = unassigned_team_ensure()
        return self._unassigned
