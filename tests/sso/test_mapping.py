"""Group claims to teams and roles (apps.sso.mapping), and the config file's `sso` section
(apps.config), pure."""

from __future__ import annotations

import pytest

from apps.config.parse import config_load, config_parse
from apps.config.types import ConfigError, KnownNames
from apps.sso.mapping import Access, GroupRule, SsoMappingConfig, access_for_groups, groups_from_claims

RULES = (
    GroupRule(group="gpu-ml", role="member", team="ml"),
    GroupRule(group="ml-leads", role="lead", team="ml"),
    GroupRule(group="gpu-vision", role="member", team="vision"),
    GroupRule(group="finops", role="finance"),
    GroupRule(group="fleet-admins", role="admin"),
    GroupRule(group="everyone", role="member", team="ml"),
    GroupRule(group="everyone", role="member", team="vision"),
)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([], Access()),
        (["sales"], Access()),
        (["gpu-ml"], Access(teams={"ml": "member"})),
        (["gpu-ml", "ml-leads"], Access(teams={"ml": "lead"})),
        (["ml-leads", "gpu-ml"], Access(teams={"ml": "lead"})),  # the order of the groups does not matter
        (["everyone"], Access(teams={"ml": "member", "vision": "member"})),  # one group, two teams
        (["everyone", "ml-leads"], Access(teams={"ml": "lead", "vision": "member"})),
        (["finops"], Access(finance=True)),
        (["fleet-admins", "gpu-vision"], Access(teams={"vision": "member"}, admin=True)),
    ],
)
def test_access_for_groups(groups: list[str], expected: Access) -> None:
    assert access_for_groups(groups, RULES) == expected


def test_lead_wins_whatever_the_order_of_the_rules() -> None:
    assert access_for_groups(["gpu-ml", "ml-leads"], tuple(reversed(RULES))).teams == {"ml": "lead"}


def test_no_access_is_empty_and_any_access_is_not() -> None:
    assert Access().empty
    assert not Access(finance=True).empty and not Access(admin=True).empty
    assert not Access(teams={"ml": "member"}).empty


@pytest.mark.parametrize(
    ("claims", "claim", "expected"),
    [
        ({"groups": ["a", "b"]}, "groups", {"a", "b"}),
        ({"groups": "a"}, "groups", {"a"}),  # one group as a string (some providers)
        ({"groups": ["a", 3, None, {"x": 1}]}, "groups", {"a"}),  # what is not a name is ignored
        ({}, "groups", set()),
        ({"groups": None}, "groups", set()),
        ({"groups": {"a": 1}}, "groups", set()),
        ({"realm_access": {"roles": ["fw-admin"]}}, "realm_access.roles", {"fw-admin"}),  # Keycloak
        ({"https://fleetwatt.example/groups": ["g"]}, "https://fleetwatt.example/groups", {"g"}),  # Auth0
        ({"roles": ["r"], "groups": ["g"]}, "roles", {"r"}),  # Azure AD app roles
        ({"realm_access": ["x"]}, "realm_access.roles", set()),
    ],
)
def test_groups_from_claims(claims: dict[str, object], claim: str, expected: set[str]) -> None:
    assert groups_from_claims(claims, claim) == expected


# --- the config file's `sso` section -------------------------------------------------------------------

KNOWN = KnownNames(teams=frozenset({"vision"}))


def _problems(text: str, known: KnownNames = KNOWN) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        config_load(text, known=known)
    return caught.value.problems


def test_a_file_without_sso_has_none_and_keeps_working() -> None:
    config = config_load("teams:\n  - {name: ml}\n", known=KNOWN)
    assert config.sso is None and [t.name for t in config.teams] == ["ml"]


def test_the_sso_section_is_read_in_its_order() -> None:
    config = config_load(
        """
teams: [{name: ml}]
sso:
  groups_claim: realm_access.roles
  map:
    - {group: gpu-ml, team: ml, role: member}
    - {group: gpu-vision, team: vision, role: lead}   # a team already in the database
    - {group: finops, role: finance}
    - {group: fleet-admins, role: admin}
""",
        known=KNOWN,
    )
    assert config.sso == SsoMappingConfig(
        groups_claim="realm_access.roles",
        rules=(
            GroupRule(group="gpu-ml", role="member", team="ml"),
            GroupRule(group="gpu-vision", role="lead", team="vision"),
            GroupRule(group="finops", role="finance"),
            GroupRule(group="fleet-admins", role="admin"),
        ),
    )


def test_the_groups_claim_defaults_to_groups_and_an_empty_map_is_allowed() -> None:
    assert config_parse({"sso": {"map": []}}) == config_parse({"sso": {"map": []}})
    assert config_parse({"sso": {"map": []}}).sso == SsoMappingConfig(groups_claim="groups", rules=())


def test_every_problem_of_the_sso_section_is_listed_with_its_path() -> None:
    problems = _problems(
        """
sso:
  groups_clam: groups
  map:
    - {group: a, team: mll, role: member}
    - {group: b, team: vision, role: owner}
    - {group: c, role: member}
    - {group: d, team: vision, role: finance}
    - {team: vision, role: member}
    - {group: e, team: vision, role: member}
    - {group: e, team: vision, role: lead}
    - nonsense
"""
    )
    assert problems == [
        "sso.groups_clam: unknown key (did you mean 'groups_claim'? expected: groups_claim, map)",
        "sso.map[0].team: unknown team 'mll': not in this file nor in the database (known: vision)",
        "sso.map[1].role: expected one of member, lead, finance, admin, got a string ('owner')",
        "sso.map[2].team: required: role 'member' is a membership of one team",
        "sso.map[3].team: role 'finance' is fleet-wide (every team): give no team",
        "sso.map[4].group: required",
        "sso.map[6]: group 'e' is already mapped to 'vision' at sso.map[5]",
        "sso.map[7]: expected a mapping, got a string ('nonsense')",
    ]


def test_an_unknown_team_with_no_team_anywhere_says_so() -> None:
    problems = _problems("sso: {map: [{group: a, team: ml, role: member}]}", known=KnownNames())
    assert problems == ["sso.map[0].team: unknown team 'ml': not in this file nor in the database (no team is defined)"]


def test_the_section_must_be_a_mapping() -> None:
    assert _problems("sso: [a, b]") == ["sso: expected a mapping, got a list"]
