"""Serializer fields shared by the APIs: query parameters and bodies read by apps.core.web.params, a value that is not
what the field takes a 400 naming it (DRF puts a field's error under its name)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from . import params


def _parsed(parse: Callable[[str], Any], data: Any) -> Any:
    try:
        return parse(data)
    except params.QueryError as exc:
        raise serializers.ValidationError(exc.sentence) from None


class NameField(serializers.SlugRelatedField):
    """An object by its name; a value Postgres cannot hold (a NUL character) is simply not found."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\0"))
        return super().to_internal_value(data)


class MomentField(serializers.DateTimeField):
    """A time (apps.core.web.params.moment): ISO 8601, a plain day its midnight, in UTC, years 2000 to 2100."""

    def to_internal_value(self, value: Any) -> datetime:
        return _parsed(lambda raw: params.moment(raw, name=""), value)


class DayField(serializers.DateField):
    """A day as YYYY-MM-DD (apps.core.web.params.day)."""

    def to_internal_value(self, value: Any) -> date:
        return _parsed(lambda raw: params.day(raw, name=""), value)


@extend_schema_field({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$", "example": "2026-11"})
class MonthField(serializers.CharField):
    """A calendar month as YYYY-MM (apps.core.web.params.month): its first day."""

    def to_internal_value(self, data: Any) -> date:  # type: ignore[override]  # a day, not the text
        return _parsed(lambda raw: params.month(raw, name=""), data)


@extend_schema_field({"type": "string", "pattern": "^[0-9]{4}-W[0-9]{2}$", "example": "2026-W48"})
class WeekField(serializers.CharField):
    """An ISO week as YYYY-Www (apps.core.web.params.iso_week): its Monday."""

    def to_internal_value(self, data: Any) -> date:  # type: ignore[override]  # a day, not the text
        return _parsed(lambda raw: params.iso_week(raw, name=""), data)


class TextField(serializers.CharField):
    """Free text (apps.core.web.params.text): no NUL byte, no lone surrogate, no control character but, where
    `lines`, tabs and line breaks; at most `max_length` characters (TEXT_MAX by default)."""

    def __init__(self, *, lines: bool = False, **kwargs: Any) -> None:
        self.lines = lines
        kwargs.setdefault("max_length", params.TEXT_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        limit = self.max_length or params.TEXT_MAX
        value = _parsed(lambda raw: params.text(raw, name="", max_length=limit, lines=self.lines), data)
        return super().to_internal_value(value)


@extend_schema_field({"type": "string", "format": "decimal", "nullable": True})
class MinorUnitMoneyField(serializers.Field):
    """A money amount already in its currency's minor unit (apps.core.units.money.round_minor, money_text), written
    as it is: "12.30" EUR, "1235" JPY, as `cost` everywhere in the API; a DecimalField would pad it to its own
    places."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str:
        return str(value)
