"""Reads of the fleet: a job's team from the team rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from django.db.models import Q

from .models import Cluster, Team, TeamRule


@dataclass(frozen=True)
class JobIdentity:
    """What the rules look at. `labels` are a pod's allow-listed labels, which only its scheduler record
    carries (kube-state-metrics): the agent's identity of a job has none."""

    scheduler: str
    user: str
    account: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)


def pod_label_rule_parse(value: str) -> tuple[str, str] | None:
    """(label name, value) of a `k8s_pod_label` rule's value `name=value` (split at the first `=`); None
    where it is not of that form (both parts needed: Prometheus keeps no label with an empty value)."""
    name, _, wanted = value.partition("=")
    name, wanted = name.strip(), wanted.strip()
    return (name, wanted) if name and wanted else None


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
        case TeamRule.Kind.K8S_POD_LABEL:
            label = pod_label_rule_parse(rule.value)
            return identity.scheduler == "k8s" and label is not None and identity.labels.get(label[0]) == label[1]
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
