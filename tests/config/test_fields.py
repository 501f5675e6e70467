"""Typed reads of the fleet config (apps/config/fields.py, pure): each read returns the value or None, and records
every problem with its path instead of stopping at the first. Each rule through a whole file is
tests/config/test_config.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from apps.config.fields import (
    Fields,
    Problems,
    mapping_read,
    names_in,
    path_join,
    reference_read,
    section_read,
    unique_names_check,
    value_kind,
)


def _fields(raw: dict[str, Any], allowed: tuple[str, ...] = ()) -> Fields:
    return Fields(raw, "sites[0]", Problems(), allowed or tuple(raw))


def test_paths_join_keys_under_their_mapping() -> None:
    assert path_join("", "sites") == "sites"
    assert path_join("sites[0]", "pue_by_month") == "sites[0].pue_by_month"
    assert path_join("sites[0].pue_by_month", 13) == "sites[0].pue_by_month.13"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "nothing (null)"),
        (True, "a boolean (true)"),
        (3, "a number (3)"),
        (1.5, "a number (1.5)"),
        ("x", "a string ('x')"),
        ([1], "a list"),
        ({"a": 1}, "a mapping"),
        (Decimal("1"), "Decimal"),
    ],
)
def test_a_value_is_named_by_its_yaml_kind(value: object, kind: str) -> None:
    assert value_kind(value) == kind


def test_an_unknown_key_is_named_with_the_closest_known_one() -> None:
    problems = Problems()
    Fields({"pue_by_mnth": {}, "colour": "red"}, "sites[0]", problems, ("pue", "pue_by_month"))
    assert problems.items == [
        "sites[0].pue_by_mnth: unknown key (did you mean 'pue_by_month'? expected: pue, pue_by_month)",
        "sites[0].colour: unknown key (expected: pue, pue_by_month)",
    ]
    assert len(problems) == 2


# string


def test_a_string_is_read_as_written() -> None:
    f = _fields({"name": "dc-a", "note": ""})
    assert f.string("name", slug=True) == "dc-a"
    assert f.string("note", allow_empty=True) == ""
    assert f.string("absent", required=False) is None
    assert not f.problems.items


@pytest.mark.parametrize(
    ("value", "options", "problem"),
    [
        (False, {}, "expected a string, got a boolean (false) (YAML reads unquoted yes/no/on/off/NO as booleans"),
        (12, {}, "expected a string, got a number (12) (quote it)"),
        (["a"], {}, "expected a string, got a list"),
        ("  ", {}, "must not be empty"),
        ("x" * 11, {"max_length": 10}, "longer than 10 characters"),
        ("dc a", {"slug": True}, "'dc a' is not a slug (letters, digits, - and _ only)"),
        ("dc-a\n", {"slug": True}, "is not a slug"),  # no newline slips past the end of the pattern
    ],
)
def test_what_is_not_the_string_asked_for(value: object, options: dict[str, Any], problem: str) -> None:
    f = _fields({"name": value})
    assert f.string("name", **options) is None
    assert len(f.problems.items) == 1 and f.problems.items[0].startswith("sites[0].name: ")
    assert problem in f.problems.items[0]


def test_a_missing_required_key_is_a_problem_and_an_optional_one_is_not() -> None:
    f = _fields({})
    assert f.string("name") is None and f.number("pue") is None and f.integer("gpus") is None
    assert f.number("optional", required=False) is None
    assert f.problems.items == ["sites[0].name: required", "sites[0].pue: required", "sites[0].gpus: required"]


# number, integer, money


def test_numbers_with_their_bounds() -> None:
    f = _fields({"pue": 1, "life": 0, "low": 0.9, "inf": float("inf"), "flag": True, "text": "1.2"})
    assert f.number("pue", minimum=1.0) == 1.0 and isinstance(f.number("pue"), float)
    assert f.number("life", above=0.0) is None
    assert f.number("low", minimum=1.0) is None
    assert f.number("inf") is None
    assert f.number("flag") is None  # YAML's true is not 1
    assert f.number("text") is None
    assert f.problems.items == [
        "sites[0].life: must be greater than 0, got 0",
        "sites[0].low: must be at least 1, got 0.9",
        "sites[0].inf: must be a finite number",
        "sites[0].flag: expected a number, got a boolean (true)",
        "sites[0].text: expected a number, got a string ('1.2')",
    ]


def test_a_number_given_by_value_is_checked_at_its_own_path() -> None:
    f = _fields({})
    assert f.number("", minimum=1.0, value=0.5, where="sites[0].pue_by_month.7") is None
    assert f.problems.items == ["sites[0].pue_by_month.7: must be at least 1, got 0.5"]


def test_whole_numbers_within_their_range() -> None:
    f = _fields({"gpus": 8, "half": 2.5, "many": 40000, "yes": True})
    assert f.integer("gpus", minimum=1, maximum=32767) == 8
    assert f.integer("half") is None
    assert f.integer("many", maximum=32767) is None
    assert f.integer("yes") is None
    assert f.problems.items == [
        "sites[0].half: expected a whole number, got a number (2.5)",
        "sites[0].many: must be between 0 and 32767, got 40000",
        "sites[0].yes: expected a whole number, got a boolean (true)",
    ]


def test_money_is_kept_exact_as_written() -> None:
    f = _fields({"price": 0.18, "rate": 2, "fine": 0.12345, "finer": 0.123456, "big": 123456, "minus": -1})
    assert f.money("price", places=5, max_digits=10) == Decimal("0.18")  # not 0.179999...
    assert f.money("rate", places=4, max_digits=10) == Decimal("2")
    assert f.money("fine", places=5, max_digits=10) == Decimal("0.12345")
    assert f.money("finer", places=5, max_digits=10) is None
    assert f.money("big", places=5, max_digits=10) is None
    assert f.money("minus", places=5, max_digits=10) is None
    assert f.problems.items == [
        "sites[0].finer: at most 5 decimal places, got 0.123456",
        "sites[0].big: too large (under 100000)",
        "sites[0].minus: must be at least 0, got -1",
    ]


# boolean, choice, currency, items


def test_booleans_choices_and_currencies_with_their_defaults() -> None:
    f = _fields({"flexible": True, "basis": "market", "currency": "USD"})
    assert f.boolean("flexible", default=False) is True
    assert f.boolean("absent", default=False) is False
    assert f.choice("basis", ("location", "market")) == "market"
    assert f.choice("absent", ("location", "market"), default="location") == "location"
    assert f.currency("currency") == "USD"
    assert f.currency("absent") == "EUR"
    assert not f.problems.items


def test_what_is_not_a_boolean_a_choice_or_a_currency() -> None:
    f = _fields({"flexible": "yes", "basis": "average", "currency": "usd", "kind": None})
    assert f.boolean("flexible", default=False) is None
    assert f.choice("basis", ("location", "market")) is None
    assert f.currency("currency") is None
    assert f.choice("kind", ("a", "b")) is None
    assert f.choice("absent", ("a", "b")) is None  # no default: required
    assert f.problems.items == [
        "sites[0].flexible: expected true or false, got a string ('yes')",
        "sites[0].basis: expected one of location, market, got a string ('average')",
        "sites[0].currency: expected an ISO 4217 code (three capital letters, e.g. EUR), got a string ('usd')",
        "sites[0].kind: expected one of a, b, got nothing (null)",
        "sites[0].absent: required",
    ]


def test_a_lists_items_carry_their_paths_and_null_is_an_empty_list() -> None:
    f = _fields({"nodes": ["a", "b"], "none": None, "one": "a"})
    assert f.items("nodes") == [("sites[0].nodes[0]", "a"), ("sites[0].nodes[1]", "b")]
    assert f.items("none") == [] and f.items("absent") == []
    assert f.items("one") == []
    assert f.problems.items == ["sites[0].one: expected a list, got a string ('a')"]


# mapping_read, section_read, names_in, unique_names_check


def test_a_mapping_is_read_and_anything_else_named() -> None:
    problems = Problems()
    assert mapping_read({"name": "a"}, "sites[0]", problems, ("name",)) is not None
    assert mapping_read("dc-b", "sites[1]", problems, ("name",)) is None
    assert problems.items == ["sites[1]: expected a mapping, got a string ('dc-b')"]


def test_a_section_is_its_elements_with_their_paths() -> None:
    problems = Problems()
    document = {"sites": [{"name": "a"}, "b"], "teams": None, "clusters": {"name": "c"}}
    assert section_read(document, "sites", problems) == [("sites[0]", {"name": "a"}), ("sites[1]", "b")]
    assert section_read(document, "teams", problems) == []
    assert section_read(document, "job_groups", problems) == []
    assert section_read(document, "clusters", problems) == []
    assert problems.items == ["clusters: expected a list, got a mapping"]


def test_names_are_those_given_as_strings_and_each_given_once() -> None:
    problems = Problems()
    elements = [("t[0]", {"name": "a"}), ("t[1]", {"name": 3}), ("t[2]", "x"), ("t[3]", {"name": "a"})]
    assert names_in(elements) == {"a"}
    unique_names_check(elements, problems)
    assert problems.items == ["t[3].name: 'a' is already defined at t[0]"]


# reference_read


def test_a_reference_resolves_in_the_file_or_the_database() -> None:
    f = _fields({"site": "dc-a", "other": "dc-b", "missing": "dc-x"})
    assert reference_read(f, "site", what="site", in_file={"dc-a"}, known=(), required=True) == "dc-a"
    assert reference_read(f, "other", what="site", in_file={"dc-a"}, known={"dc-b"}, required=True) == "dc-b"
    assert reference_read(f, "missing", what="site", in_file={"dc-a"}, known={"dc-b"}, required=True) is None
    assert reference_read(f, "absent", what="site", in_file=set(), known=(), required=False) is None
    assert f.problems.items == [
        "sites[0].missing: unknown site 'dc-x': not in this file nor in the database (known: dc-a, dc-b)"
    ]


def test_a_reference_when_nothing_of_its_kind_exists() -> None:
    f = _fields({"server_type": "hgx"})
    reference_read(f, "server_type", what="server type", in_file=set(), known=(), required=True)
    assert f.problems.items == [
        "sites[0].server_type: unknown server type 'hgx': not in this file nor in the database (no server type is "
        "defined)"
    ]
