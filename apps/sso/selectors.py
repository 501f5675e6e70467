"""Reads of single sign-on's configuration."""

from __future__ import annotations

from .mapping import GroupRule, SsoMappingConfig
from .models import SsoGroupRule, SsoSettings


def sso_mapping_read() -> SsoMappingConfig:
    """The stored `sso` section (no rules, the default claim, if no config file gave one)."""
    stored = SsoSettings.objects.filter(id=1).first()
    rules = tuple(
        GroupRule(group=r.group, role=r.role, team=r.team.name if r.team else None)
        for r in SsoGroupRule.objects.select_related("team")
    )
    return SsoMappingConfig(groups_claim=stored.groups_claim, rules=rules) if stored else SsoMappingConfig(rules=rules)
