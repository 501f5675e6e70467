"""Writing many rows in one statement. Django's bulk_update builds a CASE per field and row, which costs
seconds of Python for a thousand jobs; `UPDATE ... FROM unnest(...)` costs milliseconds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import connection, models
from django.db.models.options import Options


def rows_update(objs: Sequence[models.Model], fields: Sequence[str], *, batch_size: int = 2000) -> None:
    """UPDATE the given fields of the given saved instances, by primary key: one array parameter per
    column (`unnest`), so the statement stays small however many rows; array columns, which cannot be
    unnested row by row, go through `VALUES`."""
    if not objs:
        return
    meta = type(objs[0])._meta
    pk = meta.pk
    cols = [_column(meta, name) for name in fields]
    if any(isinstance(f, ArrayField) for f in cols):
        _rows_update_values(objs, cols, batch_size=batch_size)
        return
    arrays = [f"%s::{pk.db_type(connection)}[]"] + [
        "%s::text[]" if isinstance(f, models.JSONField) else f"%s::{f.db_type(connection)}[]" for f in cols
    ]
    names = ", ".join([f'"{pk.column}"'] + [f'"{f.column}"' for f in cols])
    assignments = ", ".join(
        f'"{f.column}" = v."{f.column}"' + ("::jsonb" if isinstance(f, models.JSONField) else "") for f in cols
    )
    params = [[obj.pk for obj in objs]] + [[_scalar(f, _value(f, obj)) for obj in objs] for f in cols]
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{meta.db_table}" AS t SET {assignments} '
            f"FROM unnest({', '.join(arrays)}) AS v({names}) "
            f'WHERE t."{pk.column}" = v."{pk.column}"',
            params,
        )


def _column(meta: Options[Any], name: str) -> models.Field[Any, Any]:
    """The named field, which must have a column (a reverse relation has none)."""
    field = meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{meta.label}.{name} has no column to write.")
    return field


def _value(field: models.Field[Any, Any], obj: models.Model) -> Any:
    raw = getattr(obj, field.attname)
    return json.dumps(raw) if isinstance(field, models.JSONField) else raw


def _rows_update_values(objs: Sequence[models.Model], cols: list[Any], *, batch_size: int) -> None:
    meta = type(objs[0])._meta
    pk = meta.pk
    casts = [f"%s::{pk.db_type(connection)}"] + [f"%s::{f.db_type(connection)}" for f in cols]
    row_sql = "(" + ", ".join(casts) + ")"
    assignments = ", ".join(f'"{f.column}" = v."{f.column}"' for f in cols)
    names = ", ".join([f'"{pk.column}"'] + [f'"{f.column}"' for f in cols])
    with connection.cursor() as cursor:
        for start in range(0, len(objs), batch_size):
            batch = objs[start : start + batch_size]
            params: list[Any] = []
            for obj in batch:
                params.append(obj.pk)
                params.extend(_value(f, obj) for f in cols)
            cursor.execute(
                f'UPDATE "{meta.db_table}" AS t SET {assignments} '
                f"FROM (VALUES {', '.join([row_sql] * len(batch))}) AS v({names}) "
                f'WHERE t."{pk.column}" = v."{pk.column}"',
                params,
            )


def rows_upsert(objs: Sequence[models.Model], *, unique_fields: Sequence[str], update_fields: Sequence[str]) -> None:
    """INSERT ... ON CONFLICT (unique_fields) DO UPDATE SET update_fields, for unsaved instances: a new
    row gets every column (the model's defaults included), an existing one only `update_fields`. One array
    parameter per column (`unnest`), so the statement stays small; JSON and array columns, which cannot be
    unnested as they are, travel as JSON text and are rebuilt in the SELECT."""
    if not objs:
        return
    meta = type(objs[0])._meta
    cols = [f for f in meta.concrete_fields if not f.primary_key]
    names = ", ".join(f'"{f.column}"' for f in cols)
    arrays = ", ".join(f"%s::{_unnest_type(f)}[]" for f in cols)
    conflict = ", ".join(f'"{_column(meta, n).column}"' for n in unique_fields)
    updates = ", ".join(f'"{_column(meta, n).column}" = EXCLUDED."{_column(meta, n).column}"' for n in update_fields)
    params = [[_unnest_value(f, getattr(obj, f.attname)) for obj in objs] for f in cols]
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{meta.db_table}" ({names}) SELECT {", ".join(_rebuilt(f) for f in cols)} '
            f"FROM unnest({arrays}) AS v({names}) "
            f"ON CONFLICT ({conflict}) DO UPDATE SET {updates}",
            params,
        )


def _as_json(field: models.Field[Any, Any]) -> bool:
    return isinstance(field, models.JSONField | ArrayField)


def _unnest_type(field: models.Field[Any, Any]) -> str:
    return "text" if _as_json(field) else str(field.db_type(connection))


def _unnest_value(field: models.Field[Any, Any], raw: Any) -> Any:
    if _as_json(field):
        return None if raw is None else json.dumps(raw)
    return _scalar(field, raw)


def _rebuilt(field: models.Field[Any, Any]) -> str:
    """The column as the table wants it, from the unnested value."""
    column = f'v."{field.column}"'
    if isinstance(field, models.JSONField):
        return f"{column}::jsonb"
    if isinstance(field, ArrayField):
        array = f"ARRAY(SELECT jsonb_array_elements_text({column}::jsonb))::{field.db_type(connection)}"
        return f"CASE WHEN {column} IS NULL THEN NULL ELSE {array} END"
    return column


def _scalar(field: models.Field[Any, Any], raw: Any) -> Any:
    """One Python type per array: psycopg refuses a list that mixes int and float."""
    if raw is None:
        return None
    if isinstance(field, models.FloatField):
        return float(raw)
    if isinstance(field, models.IntegerField | models.BigIntegerField | models.ForeignKey):
        return int(raw)
    return raw
