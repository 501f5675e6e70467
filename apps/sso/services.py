"""Single sign-on's writes: the user a provider's login stands for, and their teams and roles recomputed
from the groups it claims (docs/sso.md)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.db import transaction

from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Team, TeamMembership

from .mapping import Access
from .models import SsoGrant, SsoIdentity

NO_TEAM = "Your account has no fleetwatt team: none of your groups is given one. Ask your fleetwatt admin."


class SsoRefused(Exception):
    """The login is refused; the message says why, for the person logging in."""


@dataclass(frozen=True)
class SsoClaims:
    """Who the provider says logged in."""

    issuer: str
    subject: str
    username: str
    email: str = ""
    first_name: str = ""
    last_name: str = ""


def sso_user_login(*, claims: SsoClaims, access: Access, groups: list[str]) -> User:
    """The user of this provider subject, created on their first login, with the memberships and roles single
    sign-on gave them recomputed from `access`: given where it gives more, taken back where it no longer
    does; what an admin granted by hand is left alone. Refused (SsoRefused) when the user would have no
    access at all: nothing is created for a newcomer; a known user loses what single sign-on gave."""
    with transaction.atomic():
        identity = (
            SsoIdentity.objects.select_related("user")
            .select_for_update()
            .filter(issuer=claims.issuer, subject=claims.subject)
            .first()
        )
        newcomer = identity is None
        if identity is None:
            if access.empty:
                raise SsoRefused(NO_TEAM)
            if User.objects.filter(username__iexact=claims.username).exists():
                raise SsoRefused(
                    f"A fleetwatt account named {claims.username!r} already exists and is not linked to your "
                    "single sign-on identity. Ask your fleetwatt admin to link it (admin: SSO identities)."
                )
            user = User.objects.create_user(claims.username, email=claims.email)  # no usable password
            identity = SsoIdentity.objects.create(user=user, issuer=claims.issuer, subject=claims.subject)
        user = identity.user
        if not user.is_active:
            raise SsoRefused("Your fleetwatt account is deactivated. Ask your fleetwatt admin.")
        _profile_update(user, claims)
        _teams_sync(user, access)
        _fleet_roles_sync(user, access)
        identity.last_login_groups = sorted(groups)
        identity.save(update_fields=["last_login_groups"])
        if newcomer and not _has_access(user):  # (its teams were not found): refused here, nothing is created
            raise SsoRefused(NO_TEAM)
    if not _has_access(user):
        raise SsoRefused(NO_TEAM)
    return user


def _profile_update(user: User, claims: SsoClaims) -> None:
    values = {"email": claims.email, "first_name": claims.first_name[:150], "last_name": claims.last_name[:150]}
    changed = [name for name, value in values.items() if value and getattr(user, name) != value]
    for name in changed:
        setattr(user, name, values[name])
    if changed:
        user.save(update_fields=changed)


def _teams_sync(user: User, access: Access) -> None:
    granted = {g.team_id: g for g in SsoGrant.objects.filter(user=user) if g.team_id is not None}
    memberships = {m.team_id: m for m in TeamMembership.objects.filter(user=user)}
    wanted = dict(Team.objects.filter(name__in=list(access.teams)).values_list("id", "name"))
    for team_id, name in wanted.items():
        role = access.teams[name]
        grant, membership = granted.get(team_id), memberships.get(team_id)
        if membership is None:
            TeamMembership.objects.create(user=user, team_id=team_id, role=role)
            SsoGrant.objects.update_or_create(user=user, team_id=team_id, defaults={"role": role})
        elif grant is not None and membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
            grant.role = role
            grant.save(update_fields=["role"])
        # a membership an admin gave by hand (no grant) stays as the admin set it
    for granted_team_id, stale in granted.items():
        if granted_team_id not in wanted:
            TeamMembership.objects.filter(user=user, team_id=granted_team_id).delete()
            stale.delete()


def _fleet_roles_sync(user: User, access: Access) -> None:
    granted = set(SsoGrant.objects.filter(user=user, team__isnull=True).values_list("role", flat=True))
    finance, _ = Group.objects.get_or_create(name=FINANCE_GROUP)
    in_finance = user.groups.filter(id=finance.id).exists()
    if access.finance and not in_finance:
        user.groups.add(finance)
        SsoGrant.objects.get_or_create(user=user, role="finance", team=None)
    elif not access.finance and "finance" in granted:
        user.groups.remove(finance)
        SsoGrant.objects.filter(user=user, role="finance", team__isnull=True).delete()
    if access.admin and not user.is_staff:
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
        SsoGrant.objects.get_or_create(user=user, role="admin", team=None)
    elif not access.admin and "admin" in granted:
        user.is_staff = user.is_superuser = False
        user.save(update_fields=["is_staff", "is_superuser"])
        SsoGrant.objects.filter(user=user, role="admin", team__isnull=True).delete()


def _has_access(user: User) -> bool:
    return (
        user.is_staff
        or user.is_superuser
        or user.groups.filter(name=FINANCE_GROUP).exists()
        or TeamMembership.objects.filter(user=user).exists()
    )
