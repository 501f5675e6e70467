"""Who may see what. Team scoping itself lives in Job.objects.visible_to."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

FINANCE_GROUP = "finance"


def user_sees_all_teams(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Admins (staff) and finance see every team; everyone else their own."""
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    return user.groups.filter(name=FINANCE_GROUP).exists()
