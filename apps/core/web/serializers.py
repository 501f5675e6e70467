"""Read-only serializers for long lists: the same output as DRF's, for a fraction of its cost per row."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.conf import settings
from rest_framework import ISO_8601, serializers
from rest_framework.fields import is_simple_callable
from rest_framework.settings import api_settings

# Fields whose DRF `to_representation` is exactly this builtin (checked by type, not subclass).
_PLAIN: dict[type[serializers.Field], Callable[[Any], Any]] = {
    serializers.CharField: str,
    serializers.FloatField: float,
    serializers.IntegerField: int,
}


def _conversion(field: serializers.Field) -> Callable[[Any], Any]:
    """The field's representation of a value that is not None."""
    if type(field) is serializers.DateTimeField and _renders_iso_8601(field) and settings.TIME_ZONE == "UTC":
        return _utc_iso_8601(field)
    return _PLAIN.get(type(field), field.to_representation)


def _renders_iso_8601(field: serializers.DateTimeField) -> bool:
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)  # as DRF reads it
    return isinstance(output_format, str) and output_format.lower() == ISO_8601


_ZERO = timedelta(0)


def _utc_iso_8601(field: serializers.DateTimeField) -> Callable[[Any], Any]:
    """DRF's ISO 8601 of a datetime, without its time zone conversion where there is none to make: a time in
    UTC (as Postgres gives them) in the app's zone, UTC (it never activates another). Anything else goes
    through DRF."""

    def convert(value: Any) -> Any:
        if isinstance(value, datetime) and value.utcoffset() == _ZERO:
            return value.replace(tzinfo=None).isoformat() + "Z"
        return field.to_representation(value)

    return convert


# One step of the plan: (output name, method name or None, attribute path, conversion).
_Step = tuple[str, str | None, tuple[str, ...], Callable[[Any], Any]]
# One step of the plan for values() rows: (output name, key or None, method name or None, conversion).
_RowStep = tuple[str, str | None, str | None, Callable[[Any], Any]]


class PlannedRepresentationMixin:
    """Renders each row by a plan compiled once per serializer class from its declared fields.

    DRF walks the fields of every row through deep-copied field objects and attribute lookups guarded
    by exceptions: for a page of jobs with 40 fields that costs more than the query. The plan keeps the
    same rules (a missing link gives null, every field its own representation, method fields on the
    serializer itself) and shortcuts only the plain ones. Nested serializers are not supported.
    `tests/api/test_jobs_api.py` compares the output with DRF's own."""

    # For rows read with `values()`: the columns each method field reads (its method then gets the row, whose
    # columns read as attributes, in place of the model instance).
    row_method_columns: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def row_keys(cls) -> list[str]:
        """The columns `QuerySet.values()` must select for rows this serializer renders (`to_representation`
        takes such a dict as well as a model instance: no model instance is built for a list's page)."""
        keys = [key for _, key, _, _ in _row_plan(cls) if key is not None]  # type: ignore[arg-type]
        return list(dict.fromkeys([*keys, *(c for cols in cls.row_method_columns.values() for c in cols)]))

    def to_representation(self, instance: Any) -> dict[str, Any]:
        if isinstance(instance, dict):
            columns = _Row(instance)
            return {
                name: getattr(self, method)(columns)
                if method is not None
                else (None if (value := instance[key]) is None else convert(value))
                for name, key, method, convert in _row_plan(type(self))  # type: ignore[arg-type]
            }
        row: dict[str, Any] = {}
        # A class is hashable; mypy reads its __hash__ as the unbound method (python/mypy#11470).
        for name, method, path, convert in _plan(type(self)):  # type: ignore[arg-type]
            if method is not None:
                row[name] = getattr(self, method)(instance)
                continue
            value = instance
            for attr in path:
                value = getattr(value, attr)
                if callable(value) and is_simple_callable(value):
                    value = value()
                if value is None:
                    break
            row[name] = None if value is None else convert(value)
        return row


@functools.cache
def _plan(serializer_class: type[serializers.Serializer]) -> tuple[_Step, ...]:
    steps: list[_Step] = []
    for name, field in serializer_class().fields.items():
        if field.write_only:
            continue
        if isinstance(field, serializers.BaseSerializer):
            raise TypeError(f"{serializer_class.__name__}.{name}: nested serializers are not planned.")
        if isinstance(field, serializers.SerializerMethodField):
            steps.append((name, field.method_name, (), _identity))
            continue
        steps.append((name, None, tuple(field.source_attrs), _conversion(field)))
    return tuple(steps)


def _identity(value: Any) -> Any:
    return value


class _Row(dict[str, Any]):
    """A `values()` row whose columns read as attributes, for a method field written for model instances."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{name}: not a column of the row (list it in row_method_columns)") from None


_NOT_IN_ROWS = (serializers.BaseSerializer, serializers.SerializerMethodField, serializers.RelatedField)


@functools.cache
def _row_plan(serializer_class: type[serializers.Serializer]) -> tuple[_RowStep, ...]:
    """(output name, `values()` key, method name, conversion) per field, for rows read with `QuerySet.values()`:
    a related field's key is the column it shows (`job` is the job's id, `cluster` with slug `name` is
    `cluster__name`); a method field has no key: its method is given the whole row."""
    method_columns: dict[str, tuple[str, ...]] = getattr(serializer_class, "row_method_columns", {})
    steps: list[_RowStep] = []
    for name, field in serializer_class().fields.items():
        if field.write_only:
            continue
        key = "__".join(field.source_attrs)
        if isinstance(field, serializers.SerializerMethodField) and name in method_columns:
            steps.append((name, None, field.method_name, _identity))
        elif isinstance(field, serializers.SlugRelatedField):
            steps.append((name, f"{key}__{field.slug_field}", None, _identity))
        elif isinstance(field, serializers.PrimaryKeyRelatedField):
            steps.append((name, key, None, _identity))
        elif isinstance(field, _NOT_IN_ROWS):
            raise TypeError(f"{serializer_class.__name__}.{name}: not rendered from values() rows.")
        else:
            steps.append((name, key, None, _conversion(field)))
    return tuple(steps)
