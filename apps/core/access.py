"""Who may see what. Team scoping itself lives in Team.objects.visible_to."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

FINANCE_GROUP = "finance"
_SEES_ALL = "_fleetwatt_sees_all_teams"


def user_sees_all_teams(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Admins (staff) and finance see every team; everyone else their own."""
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    # Asked several times a request (scoping, permissions): kept on the user object, which lives one request.
    cached: bool | None = getattr(user, _SEES_ALL, None)
    if cached is None:
        cached = user.groups.filter(name=FINANCE_GROUP).exists()
        setattr(user, _SEES_ALL, cached)
    return cached
