"""apps.core.web.fields: the API's serializer fields read their values with apps.core.web.params. A value a field does
not take is a 400 under the field's own name, with params' sentence; a good one arrives parsed (a time in UTC, a
month's first day, a week's Monday); free text keeps its limits and, where asked, its line breaks; money is written
as it is, in its currency's minor unit."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from rest_framework import serializers

from apps.core.web.fields import DayField, MinorUnitMoneyField, MomentField, MonthField, NameField, TextField, WeekField
from apps.fleet.models import Team


class _Asked(serializers.Serializer):
    at = MomentField(required=False)
    day = DayField(required=False)
    month = MonthField(required=False)
    week = WeekField(required=False)
    search = TextField(required=False, max_length=10)
    reason = TextField(required=False, lines=True)


def _errors(**data: Any) -> dict[str, list[str]]:
    asked = _Asked(data=data)
    assert not asked.is_valid()
    return {name: [str(e) for e in errors] for name, errors in asked.errors.items()}


def _valid(**data: Any) -> dict[str, Any]:
    asked = _Asked(data=data)
    assert asked.is_valid(), asked.errors
    return dict(asked.validated_data)


def test_good_values_arrive_parsed() -> None:
    assert _valid(at="2026-11-02T09:00:00+01:00", day="2026-11-02", month="2026-11", week="2026-W48") == {
        "at": datetime(2026, 11, 2, 8, tzinfo=UTC),
        "day": date(2026, 11, 2),
        "month": date(2026, 11, 1),
        "week": date(2026, 11, 23),
    }
    assert _valid(at="2026-11-02") == {"at": datetime(2026, 11, 2, tzinfo=UTC)}  # a plain day is its midnight


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("at", "2026-11-02T25:00", "A time as ISO 8601"),
        ("at", "1999-12-31", "A time from 2000-01-01"),
        ("day", "2026-02-30", "A day as YYYY-MM-DD"),
        ("day", "\uff12\uff10\uff12\uff16-11-02", "A day as YYYY-MM-DD"),  # full-width digits are not ASCII
        ("month", "2026-13", "A month as YYYY-MM"),
        ("week", "2026-W54", "An ISO week as YYYY-Www"),
        ("search", "x" * 11, "At most 10 characters."),
        ("search", "a\x00b", "Text without a NUL byte"),
        ("search", "a\nb", "Text without a control character"),
    ],
)
def test_a_value_the_field_does_not_take_is_an_error_under_its_name(field: str, value: str, said: str) -> None:
    errors = _errors(**{field: value})
    assert list(errors) == [field]
    assert errors[field][0].startswith(said), errors


def test_free_text_keeps_its_line_breaks_where_the_field_takes_lines() -> None:
    assert _valid(reason="first line\r\n\tsecond") == {"reason": "first line\r\n\tsecond"}
    assert _errors(reason="bell\x07")["reason"][0].startswith("Text without a control character")
    assert _errors(reason="x" * 201)["reason"] == ["At most 200 characters."]  # params.TEXT_MAX by default


def test_free_text_that_is_not_text_is_refused_as_drf_refuses_it() -> None:
    assert _errors(search=["a", "b"])["search"] == ["Not a valid string."]


@pytest.mark.django_db
def test_a_name_with_a_nul_is_not_found_without_asking_postgres(django_assert_num_queries) -> None:
    field = NameField(slug_field="name", queryset=Team.objects.all())
    Team.objects.create(name="vision")
    with django_assert_num_queries(0), pytest.raises(serializers.ValidationError) as refused:
        field.to_internal_value("vis\x00ion")
    assert "vis\\0ion" in str(refused.value.detail[0])  # the NUL shown, never sent
    with django_assert_num_queries(1):
        assert field.to_internal_value("vision").name == "vision"


@pytest.mark.parametrize(
    ("value", "text"), [(Decimal("12.30"), "12.30"), (Decimal("1235"), "1235"), ("0.005", "0.005")]
)
def test_money_is_written_as_it_is_and_never_read(value: Any, text: str) -> None:
    field = MinorUnitMoneyField()
    assert field.read_only and field.to_representation(value) == text
