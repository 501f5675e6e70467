"""`apply_config` with the `sso` section: stored as the file says, idempotent, left alone by a file without
it, and a bad mapping writes nothing at all."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.fleet.models import Team
from apps.sso.models import SsoGroupRule, SsoSettings
from apps.sso.selectors import sso_mapping_read

pytestmark = pytest.mark.django_db


def _apply(tmp_path: Path, text: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    out = io.StringIO()
    call_command("apply_config", str(path), stdout=out)
    return out.getvalue()


# `sso` counts the section's rules and its settings (one row: the groups claim).


def _stored() -> list[tuple[str, str, str | None]]:
    return [(r.group, r.role, r.team) for r in sso_mapping_read().rules]


FILE = """
teams: [{name: ml}, {name: vision}]
sso:
  groups_claim: roles
  map:
    - {group: gpu-ml, team: ml, role: member}
    - {group: finops, role: finance}
"""


def test_the_section_is_stored_and_applying_it_again_changes_nothing(tmp_path: Path) -> None:
    out = _apply(tmp_path, FILE)
    assert "sso               3 created, 0 updated, 0 unchanged" in out
    assert _stored() == [("gpu-ml", "member", "ml"), ("finops", "finance", None)]
    assert sso_mapping_read().groups_claim == "roles"
    again = _apply(tmp_path, FILE)
    assert "sso               0 created, 0 updated, 3 unchanged" in again and "nothing to change" in again


def test_the_file_s_map_replaces_the_stored_one_in_its_order(tmp_path: Path) -> None:
    _apply(tmp_path, FILE)
    out = _apply(
        tmp_path,
        """
sso:
  map:
    - {group: ml-leads, team: ml, role: lead}
    - {group: gpu-ml, team: ml, role: member}
""",
    )
    assert "sso               1 created, 2 updated, 0 unchanged, 1 deleted" in out
    assert _stored() == [("ml-leads", "lead", "ml"), ("gpu-ml", "member", "ml")]
    assert sso_mapping_read().groups_claim == "groups"  # left out: the default


def test_a_file_without_the_section_leaves_the_stored_one_and_reports_nothing_of_it(tmp_path: Path) -> None:
    _apply(tmp_path, FILE)
    out = _apply(tmp_path, "teams: [{name: ml, display_name: ML}]\n")
    assert "sso " not in out
    assert _stored() == [("gpu-ml", "member", "ml"), ("finops", "finance", None)]


def test_a_bad_mapping_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    # given a file with a new team and a mapping naming a team nobody defined and a role that does not exist
    text = """
teams: [{name: ml}]
sso:
  map:
    - {group: gpu-ml, team: ml, role: member}
    - {group: gpu-cv, team: computer-vision, role: member}
    - {group: boss, role: owner}
"""
    # when it is applied
    with pytest.raises(CommandError) as caught:
        _apply(tmp_path, text)
    # then every problem is named, and nothing was written: not the team, not the rules
    message = str(caught.value)
    assert "sso.map[1].team: unknown team 'computer-vision'" in message
    assert "sso.map[2].role: expected one of member, lead, finance, admin, got a string ('owner')" in message
    assert message.endswith("Nothing was written.")
    assert not Team.objects.exists() and not SsoGroupRule.objects.exists() and not SsoSettings.objects.exists()


def test_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(FILE)
    out = io.StringIO()
    call_command("apply_config", str(path), "--dry-run", stdout=out)
    assert "sso               3 created" in out.getvalue()
    assert not SsoGroupRule.objects.exists() and not SsoSettings.objects.exists()


def test_a_team_deleted_in_the_admin_takes_its_rules_with_it(tmp_path: Path) -> None:
    _apply(tmp_path, FILE)
    Team.objects.filter(name="ml").delete()
    assert _stored() == [("finops", "finance", None)]
