"""The fleet config's types (apps/config/types.py, pure): ConfigError lists every problem; a cluster's fields left
as None leave its stored values; the choices repeated here are the models'; the types are values."""

from __future__ import annotations

import dataclasses

import pytest

from apps.carbon.models import JobGroup
from apps.config import types
from apps.config.types import ClusterConfig, ConfigError, FleetConfig, KnownNames, SiteConfig, TeamConfig
from apps.fleet.models import Cluster, TeamRule


def test_the_error_lists_every_problem() -> None:
    error = ConfigError(["sites[0].pue: required", "teams[1].name: required"])
    assert str(error) == ("2 problems in the fleet config:\n  - sites[0].pue: required\n  - teams[1].name: required")
    assert error.problems == ["sites[0].pue: required", "teams[1].name: required"]
    assert isinstance(error, ValueError)
    assert str(ConfigError(["x: y"])).startswith("1 problem in the fleet config:")


def test_the_choices_are_the_models() -> None:
    assert set(types.RULE_KINDS) == set(TeamRule.Kind.values)
    assert set(types.MATCH_KINDS) == set(JobGroup.MatchKind.values)
    assert set(types.SCHEDULERS) == set(Cluster.Scheduler.values)


def test_a_cluster_names_only_what_it_changes() -> None:
    # every field but its name is "leave the stored value" unless given
    cluster = ClusterConfig(name="c1")
    given = {f.name: getattr(cluster, f.name) for f in dataclasses.fields(cluster)}
    assert given.pop("name") == "c1" and given.pop("work_counters_given") is False
    assert set(given.values()) == {None}


def test_the_types_are_frozen_values() -> None:
    team = TeamConfig(name="vision")
    with pytest.raises(dataclasses.FrozenInstanceError):
        team.name = "nlp"  # type: ignore[misc]
    assert team == TeamConfig(name="vision", display_name="", rules=())
    assert FleetConfig() == FleetConfig(sites=(), clusters=(), teams=(), sso=None)
    assert KnownNames().default_cluster is None


def test_a_timeout_from_the_settings_is_no_timeout_one_could_give() -> None:
    # a timeout is over 0 (sections.py refuses 0): 0 can only mean "cleared"
    assert types.TIMEOUT_FROM_SETTINGS == 0.0


def test_every_name_it_exports_exists() -> None:
    assert all(hasattr(types, name) for name in types.__all__)
    assert "SiteConfig" in types.__all__ and SiteConfig.__dataclass_params__.frozen  # type: ignore[attr-defined]
