"""From a provider's group claim to fleetwatt's teams and roles (docs/sso.md), pure.

A rule maps one group to a team membership (`member` or `lead` of a team) or to a fleet-wide role
(`finance`: reads every team; `admin`: staff). A user's access is the union of what their groups give;
where two groups give the same team, `lead` wins over `member`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

TEAM_ROLES = ("member", "lead")  # a membership of one team (apps.fleet TeamMembership.Role)
FLEET_ROLES = ("finance", "admin")  # every team: the `finance` group, or staff (apps.core.access.policy)
ROLES = (*TEAM_ROLES, *FLEET_ROLES)
DEFAULT_GROUPS_CLAIM = "groups"
_RANK = {role: rank for rank, role in enumerate(TEAM_ROLES)}


@dataclass(frozen=True)
class GroupRule:
    """`group` gives `role`, of `team` for the team roles (None for the fleet roles)."""

    group: str
    role: str
    team: str | None = None


@dataclass(frozen=True)
class SsoMappingConfig:
    """The config file's `sso` section: which claim holds the groups, and the rules in the file's order."""

    groups_claim: str = DEFAULT_GROUPS_CLAIM
    rules: tuple[GroupRule, ...] = ()


@dataclass(frozen=True)
class Access:
    """What a user's groups give: a role per team, and the fleet roles."""

    teams: Mapping[str, str] = field(default_factory=dict)
    finance: bool = False
    admin: bool = False

    @property
    def empty(self) -> bool:
        return not self.teams and not self.finance and not self.admin


def groups_from_claims(claims: Mapping[str, Any], groups_claim: str) -> frozenset[str]:
    """The groups in `claims[groups_claim]`: a list of strings, or one string. A claim name that is not a key
    is read as a dotted path into nested claims (Keycloak's `realm_access.roles`). Anything else: none."""
    value: Any = claims.get(groups_claim)
    if value is None and "." in groups_claim:
        value = claims
        for part in groups_claim.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple):
        return frozenset(g for g in value if isinstance(g, str))
    return frozenset()


def access_for_groups(groups: Iterable[str], rules: Iterable[GroupRule]) -> Access:
    """The access the rules give someone in `groups`."""
    held = set(groups)
    teams: dict[str, str] = {}
    finance = admin = False
    for rule in rules:
        if rule.group not in held:
            continue
        if rule.role == "finance":
            finance = True
        elif rule.role == "admin":
            admin = True
        elif rule.team is not None:
            current = teams.get(rule.team)
            if current is None or _RANK[rule.role] > _RANK[current]:
                teams[rule.team] = rule.role
    return Access(teams=teams, finance=finance, admin=admin)
