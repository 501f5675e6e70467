"""Reads of the fleet: a job's team from the team rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from .models import Cluster, Team, TeamRule


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

    def __init__(self, *, cluster: Cluster, unassigned: Team, rules: Iterable[TeamRule] | None = None) -> None:
        if rules is None:
            rules = TeamRule.objects.filter(Q(cluster=cluster) | Q(cluster__isnull=True)).select_related("team")
        self._rules = sorted(rules, key=lambda r: (r.priority, r.id or 0))
        self._unassigned = unassigned

    def team_for(self, identity: JobIdentity) -> Team:
        """The team of the first rule (by priority) that matches; the unassigned team if none does."""
        for rule in self._rules:
            if _rule_matches(rule, identity):
                return rule.team
        return self._unassigned
