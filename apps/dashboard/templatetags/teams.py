"""The viewer's teams, for the menu."""

from __future__ import annotations

from typing import Any

from django import template

from apps.core.access.policy import member_team_ids

register = template.Library()


@register.filter
def in_teams(user: Any) -> bool:
    """Whether the logged-in user is a member of a team ("My team" in the menu)."""
    return bool(user.is_authenticated and member_team_ids(user))
