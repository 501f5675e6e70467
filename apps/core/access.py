"""Who may see what, and who may write. Team scoping itself lives in Team.objects.visible_to.

- Admins (staff) see every team and write (decisions, configuration, a job's work).
- Finance (the `finance` group) sees every team and writes nothing: pages, API, DRF tokens and named API
  tokens alike; only its own named API tokens (create, revoke) are its to change. Staff in the group stay
  admins.
- Members and leads see their teams; they report their teams' jobs' work, and leads keep their teams'
  report recipients.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser, AnonymousUser, User
from django.core.exceptions import PermissionDenied

FINANCE_GROUP = "finance"
_IN_FINANCE = "_fleetwatt_in_finance"


def _in_finance(user: AbstractUser) -> bool:
    # Asked several times a request (scoping, permissions): kept on the user object, which lives one request.
    cached: bool | None = getattr(user, _IN_FINANCE, None)
    if cached is None:
        cached = user.groups.filter(name=FINANCE_GROUP).exists()
        setattr(user, _IN_FINANCE, cached)
    return cached


def user_sees_all_teams(user: AbstractUser | AnonymousUser) -> bool:
    """Admins (staff) and finance see every team; everyone else their own."""
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    return _in_finance(user)


def user_is_read_only(user: AbstractUser | AnonymousUser) -> bool:
    """Finance reads and never writes, whatever the credentials (session, DRF token, named API token)."""
    if not user.is_authenticated or user.is_staff or user.is_superuser:
        return False
    return _in_finance(user)


def acting_user(user: User | AnonymousUser) -> User:
    """The logged-in user taking a decision, as the User an audit entry names. The views that act let only
    admins in, so an anonymous user here would be a view's mistake: refused, never recorded."""
    if not user.is_authenticated:
        raise PermissionDenied("Log in to act.")
    return user
