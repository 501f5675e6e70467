"""The fleet config's validation: typed reads of one mapping of the document (`Fields`) that record every
problem with its path (`sites[0].pue_by_month.13: not a month`) instead of stopping at the first. Pure."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

_SLUG = re.compile(r"^[-a-zA-Z0-9_]+\Z")
CURRENCY = re.compile(r"^[A-Z]{3}\Z")


# --- Validation ------------------------------------------------------------------------------------


class Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def __len__(self) -> int:
        return len(self.items)


def path_join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def value_kind(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


_MISSING = object()


class Fields:
    """One mapping of the document: typed reads that record problems (and its unknown keys)."""

    def __init__(self, raw: Mapping[Any, Any], path: str, problems: Problems, allowed: Collection[str]) -> None:
        self.raw, self.path, self.problems = raw, path, problems
        for key in raw:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), list(allowed), n=1)
                suggestion = f"did you mean {hint[0]!r}? " if hint else ""
                problems.add(path_join(path, key), f"unknown key ({suggestion}expected: {', '.join(allowed)})")

    def where(self, key: str) -> str:
        return path_join(self.path, key)

    def has(self, key: str) -> bool:
        return key in self.raw

    def _get(self, key: str, required: bool) -> Any:
        if key not in self.raw:
            if required:
                self.problems.add(self.where(key), "required")
            return _MISSING
        return self.raw[key]

    def string(
        self, key: str, *, required: bool = True, max_length: int = 255, slug: bool = False, allow_empty: bool = False
    ) -> str | None:
        value = self._get(key, required)
        if value is _MISSING:
            return None
        if not isinstance(value, str):
            hint = ""
            if isinstance(value, bool):
                hint = " (YAML reads unquoted yes/no/on/off/NO as booleans: quote it)"
            elif isinstance(value, int | float):
                hint = " (quote it)"
            self.problems.add(self.where(key), f"expected a string, got {value_kind(value)}{hint}")
            return None
        if not value.strip() and not allow_empty:
            self.problems.add(self.where(key), "must not be empty")
            return None
        if len(value) > max_length:
            self.problems.add(self.where(key), f"longer than {max_length} characters")
            return None
        if slug and not _SLUG.match(value):
            self.problems.add(self.where(key), f"{value!r} is not a slug (letters, digits, - and _ only)")
            return None
        return value

    def number(
        self,
        key: str,
        *,
        required: bool = True,
        minimum: float | None = None,
        above: float | None = None,
        value: Any = _MISSING,
        where: str | None = None,
    ) -> float | None:
        if value is _MISSING:
            value = self._get(key, required)
            if value is _MISSING:
                return None
        where = where or self.where(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problems.add(where, f"expected a number, got {value_kind(value)}")
            return None
        if not math.isfinite(value):
            self.problems.add(where, "must be a finite number")
            return None
        if minimum is not None and value < minimum:
            self.problems.add(where, f"must be at least {minimum:g}, got {value:g}")
            return None
        if above is not None and value <= above:
            self.problems.add(where, f"must be greater than {above:g}, got {value:g}")
            return None
        return float(value)

    def integer(self, key: str, *, required: bool = True, minimum: int = 0, maximum: int = 2**31 - 1) -> int | None:
        value = self._get(key, required)
        if value is _MISSING:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.add(self.where(key), f"expected a whole number, got {value_kind(value)}")
            return None
        if not minimum <= value <= maximum:
            self.problems.add(self.where(key), f"must be between {minimum} and {maximum}, got {value}")
            return None
        return value

    def money(self, key: str, *, places: int, max_digits: int) -> Decimal | None:
        """A non-negative amount, kept exact as written (0.18 is Decimal('0.18'), not a binary float)."""
        number = self.number(key, minimum=0)
        if number is None:
            return None
        amount = Decimal(str(self.raw[key]))
        exponent = amount.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -places:
            self.problems.add(self.where(key), f"at most {places} decimal places, got {self.raw[key]}")
            return None
        if amount >= Decimal(10) ** (max_digits - places):
            self.problems.add(self.where(key), f"too large (under {10 ** (max_digits - places)})")
            return None
        return amount

    def boolean(self, key: str, *, default: bool) -> bool | None:
        value = self._get(key, required=False)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.problems.add(self.where(key), f"expected true or false, got {value_kind(value)}")
            return None
        return value

    def choice(self, key: str, choices: Sequence[str], *, default: str | None = None) -> str | None:
        value = self._get(key, required=default is None)
        if value is _MISSING:
            return default
        if value not in choices:
            self.problems.add(self.where(key), f"expected one of {', '.join(choices)}, got {value_kind(value)}")
            return None
        return str(value)

    def currency(self, key: str) -> str | None:
        value = self._get(key, required=False)
        if value is _MISSING:
            return "EUR"
        if not isinstance(value, str) or not CURRENCY.match(value):
            self.problems.add(
                self.where(key), f"expected an ISO 4217 code (three capital letters, e.g. EUR), got {value_kind(value)}"
            )
            return None
        return value

    def items(self, key: str) -> list[tuple[str, Any]]:
        """The elements of an optional list, each with its path."""
        value = self._get(key, required=False)
        if value is _MISSING or value is None:
            return []
        if not isinstance(value, list):
            self.problems.add(self.where(key), f"expected a list, got {value_kind(value)}")
            return []
        return [(f"{self.where(key)}[{i}]", element) for i, element in enumerate(value)]


def mapping_read(element: Any, path: str, problems: Problems, allowed: Collection[str]) -> Fields | None:
    if not isinstance(element, dict):
        problems.add(path, f"expected a mapping, got {value_kind(element)}")
        return None
    return Fields(element, path, problems, allowed)


def section_read(document: Mapping[str, Any], name: str, problems: Problems) -> list[tuple[str, Any]]:
    value = document.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(name, f"expected a list, got {value_kind(value)}")
        return []
    return [(f"{name}[{i}]", element) for i, element in enumerate(value)]


def names_in(elements: list[tuple[str, Any]]) -> set[str]:
    return {e["name"] for _, e in elements if isinstance(e, dict) and isinstance(e.get("name"), str)}


def unique_names_check(elements: list[tuple[str, Any]], problems: Problems) -> None:
    first: dict[str, str] = {}
    for path, element in elements:
        name = element.get("name") if isinstance(element, dict) else None
        if isinstance(name, str):
            if name in first:
                problems.add(path_join(path, "name"), f"{name!r} is already defined at {first[name]}")
            else:
                first[name] = path


def reference_read(
    f: Fields, key: str, *, what: str, in_file: set[str], known: Collection[str], required: bool
) -> str | None:
    name = f.string(key, required=required, max_length=100)
    if name is not None and name not in in_file and name not in known:
        choices = sorted(in_file | set(known))
        hint = f" (known: {', '.join(choices)})" if choices else f" (no {what} is defined)"
        f.problems.add(f.where(key), f"unknown {what} {name!r}: not in this file nor in the database{hint}")
        return None
    return name
