"""Who may see what, and who may write. Team scoping itself lives in Team.objects.visible_to.

- Admins (staff) see every team and write (decisions, configuration, a job's work).
- Finance (the `finance` group) sees every team and writes nothing: pages, API, DRF tokens and named API
  tokens alike; only its own named API tokens (create, revoke) are its to change. Staff in the group stay
  admins.
- Members and leads see their teams; they report their teams' jobs' work, and leads keep their teams'
  report recipients.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser, AbstractUser, AnonymousUser, Group, User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse

FINANCE_GROUP = "finance"
_VIEWER = "_fleetwatt_viewer"


@dataclass(frozen=True)
class _Viewer:
    in_finance: bool
    team_ids: tuple[int, ...]  # the teams of which the user is a member


def _viewer(user: AbstractBaseUser) -> _Viewer:
    # Asked several times a request (scoping, permissions), in one query; kept on the user object, which
    # lives one request. A session's user comes with it (user_with_viewer).
    cached: _Viewer | None = getattr(user, _VIEWER, None)
    if cached is None:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {_viewer_columns_sql()}", [user.pk, FINANCE_GROUP, user.pk])
            in_finance, team_ids = cursor.fetchone()
        cached = _Viewer(in_finance=in_finance, team_ids=tuple(team_ids))
        setattr(user, _VIEWER, cached)
    return cached


@functools.cache
def _viewer_columns_sql(user_id: str = "%s") -> str:
    # Written out, not built by the ORM: on every request, and building it cost more than running it. `user_id`:
    # the user's id as SQL (a parameter, or a column of a query that joins the user); then the finance group's name.
    user_groups = User.groups.through._meta.db_table
    memberships = apps.get_model("fleet", "TeamMembership")._meta.db_table
    return (
        f"EXISTS (SELECT 1 FROM {user_groups} ug JOIN {Group._meta.db_table} g ON g.id = ug.group_id"
        f" WHERE ug.user_id = {user_id} AND g.name = %s),"
        f" ARRAY(SELECT team_id FROM {memberships} WHERE user_id = {user_id} ORDER BY team_id)"
    )


@functools.cache
def _user_columns() -> tuple[str, ...]:
    return tuple(f.attname for f in User._meta.concrete_fields)


@functools.cache
def user_with_viewer_columns() -> str:
    """The columns of a user (table alias `u`) and of what it may see, for a written-out query that reads them with
    something else (apps.core.authentication: an API token's); its parameters: `user_with_viewer_params`."""
    columns = ", ".join(f"u.{connection.ops.quote_name(str(f.column))}" for f in User._meta.concrete_fields)
    return f"{columns}, {_viewer_columns_sql('u.id')}"


def user_with_viewer_params() -> list[Any]:
    return [FINANCE_GROUP]


@functools.cache
def _user_with_viewer_sql() -> str:
    return f"SELECT {user_with_viewer_columns()} FROM {User._meta.db_table} u WHERE u.id = %s"


def user_from_row(row: tuple[Any, ...]) -> User:
    """The user (with what it may see) of a row whose columns are `user_with_viewer_columns`."""
    columns = _user_columns()
    user = User.from_db(connection.alias, list(columns), row[: len(columns)])
    in_finance, team_ids = row[len(columns) : len(columns) + 2]
    setattr(user, _VIEWER, _Viewer(in_finance=in_finance, team_ids=tuple(team_ids)))
    return user


def user_with_viewer(user_id: int) -> User | None:
    """The user of a session, with what it may see, in one written-out query (every request of a session asks
    for both: Django's `get(pk=...)` and the viewer's query cost two round trips and 0.5 ms of building)."""
    with connection.cursor() as cursor:
        cursor.execute(_user_with_viewer_sql(), [*user_with_viewer_params(), user_id])
        row = cursor.fetchone()
    return None if row is None else user_from_row(row)


def _in_finance(user: AbstractUser) -> bool:
    return _viewer(user).in_finance


def member_team_ids(user: AbstractBaseUser) -> tuple[int, ...]:
    """The ids of the teams the (logged-in) user is a member of, read once a request."""
    return _viewer(user).team_ids


def user_sees_all_teams(user: AbstractUser | AnonymousUser) -> bool:
    """Admins (staff) and finance see every team; everyone else their own."""
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    return _in_finance(user)


def viewer_scope(user: AbstractUser) -> str:
    """What the (logged-in) user may see, as a key: the same key, the same rows. Admins see what finance sees
    and more (the fleet's weekly summaries); a member, the teams of which it is one."""
    if user.is_staff or user.is_superuser:
        return "staff"
    if _in_finance(user):
        return "finance"
    return ",".join(map(str, member_team_ids(user)))


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


def admin_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page for admins: anyone not logged in is sent to the site's login, a logged-in user who is not an
    admin gets the site's 403 (never Django administration's login, which would ask them for other
    credentials)."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_staff:
            raise PermissionDenied("This page is for admins.")
        return view(request, *args, **kwargs)

    return wrapped
