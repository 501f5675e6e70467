"""Single sign-on's writes (apps/sso/services.py): the user a provider's login stands for, created at the first
login with access and never without; their teams and fleet roles given and taken back by their groups at each
login, what an admin granted by hand left alone; a local account never taken over. Through the provider's real flow:
tests/sso/test_login.py."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Team, TeamMembership
from apps.sso.mapping import Access
from apps.sso.models import SsoGrant, SsoIdentity
from apps.sso.services import NO_TEAM, SsoClaims, SsoRefused, sso_user_login

pytestmark = pytest.mark.django_db

ADA = SsoClaims(issuer="https://idp", subject="sub-1", username="ada", email="ada@example.org", first_name="Ada")


@pytest.fixture
def teams() -> tuple[Team, Team]:
    return Team.objects.create(name="vision"), Team.objects.create(name="nlp")


def _roles(user: User) -> dict[str, str]:
    return dict(TeamMembership.objects.filter(user=user).values_list("team__name", "role"))


def test_a_first_login_creates_the_user_with_the_teams_its_groups_give(teams: tuple[Team, Team]) -> None:
    user = sso_user_login(claims=ADA, access=Access(teams={"vision": "lead"}), groups=["ml", "all"])
    assert (user.username, user.email, user.first_name, user.has_usable_password()) == (
        "ada", "ada@example.org", "Ada", False,
    )  # fmt: skip
    assert _roles(user) == {"vision": "lead"}
    identity = SsoIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject, identity.last_login_groups) == ("https://idp", "sub-1", ["all", "ml"])


def test_a_newcomer_without_access_is_refused_and_nothing_is_created(teams: tuple[Team, Team]) -> None:
    with pytest.raises(SsoRefused, match=NO_TEAM):
        sso_user_login(claims=ADA, access=Access(), groups=["nobody"])
    # a team the groups name that does not exist gives no access either
    with pytest.raises(SsoRefused):
        sso_user_login(claims=ADA, access=Access(teams={"gone": "member"}), groups=["x"])
    assert not User.objects.exists() and not SsoIdentity.objects.exists()


def test_a_local_account_of_the_same_name_is_not_taken_over(teams: tuple[Team, Team]) -> None:
    User.objects.create_user("ADA", password="local")
    with pytest.raises(SsoRefused, match="already exists and is not linked"):
        sso_user_login(claims=ADA, access=Access(teams={"vision": "member"}), groups=[])
    assert not SsoIdentity.objects.exists()


def test_a_deactivated_user_is_refused() -> None:
    user = User.objects.create_user("ada", is_active=False)
    SsoIdentity.objects.create(user=user, issuer=ADA.issuer, subject=ADA.subject)
    with pytest.raises(SsoRefused, match="deactivated"):
        sso_user_login(claims=ADA, access=Access(admin=True), groups=[])


def test_teams_follow_the_groups_from_one_login_to_the_next_and_an_admins_grant_stays(
    teams: tuple[Team, Team],
) -> None:
    vision, nlp = teams
    user = sso_user_login(claims=ADA, access=Access(teams={"vision": "lead", "nlp": "member"}), groups=[])
    # an admin adds a membership by hand
    ops = Team.objects.create(name="ops")
    TeamMembership.objects.create(user=user, team=ops, role="member")
    # when the next login's groups make ada a member of vision, and nothing of nlp
    sso_user_login(claims=ADA, access=Access(teams={"vision": "member"}), groups=[])
    # then
    assert _roles(user) == {"vision": "member", "ops": "member"}
    assert set(SsoGrant.objects.filter(user=user).values_list("team__name", "role")) == {("vision", "member")}


def test_a_membership_an_admin_gave_is_not_changed_by_the_groups(teams: tuple[Team, Team]) -> None:
    vision, _ = teams
    user = User.objects.create_user("ada")
    SsoIdentity.objects.create(user=user, issuer=ADA.issuer, subject=ADA.subject)
    TeamMembership.objects.create(user=user, team=vision, role="lead")
    sso_user_login(claims=ADA, access=Access(teams={"vision": "member"}), groups=[])
    assert _roles(user) == {"vision": "lead"}
    assert not SsoGrant.objects.exists()


def test_fleet_roles_are_given_and_taken_back() -> None:
    user = sso_user_login(claims=ADA, access=Access(finance=True, admin=True), groups=[])
    assert user.groups.filter(name=FINANCE_GROUP).exists() and user.is_staff and user.is_superuser
    # when the groups no longer give them: taken back, and with nothing left, the login is refused
    with pytest.raises(SsoRefused, match=NO_TEAM):
        sso_user_login(claims=ADA, access=Access(), groups=[])
    user.refresh_from_db()
    assert not user.groups.filter(name=FINANCE_GROUP).exists() and not user.is_staff and not user.is_superuser
    assert not SsoGrant.objects.filter(user=user).exists()


def test_staff_an_admin_made_stays_staff() -> None:
    user = User.objects.create_user("ada", is_staff=True)
    SsoIdentity.objects.create(user=user, issuer=ADA.issuer, subject=ADA.subject)
    user.groups.add(Group.objects.create(name=FINANCE_GROUP))
    sso_user_login(claims=ADA, access=Access(), groups=[])  # nothing given by sso, nothing taken back
    user.refresh_from_db()
    assert user.is_staff and user.groups.filter(name=FINANCE_GROUP).exists()


def test_the_profile_follows_the_provider_but_an_empty_claim_keeps_it(teams: tuple[Team, Team]) -> None:
    user = sso_user_login(claims=ADA, access=Access(teams={"vision": "member"}), groups=[])
    moved = SsoClaims(issuer=ADA.issuer, subject=ADA.subject, username="ignored", email="ada@new.example.org",
                      first_name="", last_name="L" * 300)  # fmt: skip
    again = sso_user_login(claims=moved, access=Access(teams={"vision": "member"}), groups=[])
    assert again.pk == user.pk and again.username == "ada"  # the identity, not the name, finds the user
    assert (again.email, again.first_name, again.last_name) == ("ada@new.example.org", "Ada", "L" * 150)
