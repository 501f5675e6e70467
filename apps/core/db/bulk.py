"""Writing many rows in one statement. Django's bulk_update builds a CASE per field and row, which costs
seconds of Python for a thousand jobs; `UPDATE ... FROM unnest(...)` costs milliseconds.

The arrays travel as binary parameters of a server-binding cursor on Django's connection (same transaction,
same logging): Django's default client-side binding writes every value into the SQL text, which costs
5-10x more Python for a thousand floats or timestamps."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import connection, models
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.backends.utils import CursorWrapper
from django.db.models.options import Options


@contextmanager
def _binding_cursor() -> Iterator[CursorWrapper]:
    """A cursor that sends its parameters apart from the statement (`%b`: in binary), wrapped as Django
    wraps its own (errors translated, queries logged where Django logs them)."""
    connection.ensure_connection()
    cursor_class: Any = ServerBindingCursor  # psycopg's (the stubs know only psycopg2's cursors)
    raw = cursor_class(connection.connection)
    wrapped = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    try:
        yield wrapped
    finally:
        raw.close()


def rows_update(objs: Sequence[models.Model], fields: Sequence[str], *, batch_size: int = 2000) -> None:
    """UPDATE the given fields of the given saved instances, by primary key: one array parameter per
    column (`unnest`), so the statement stays small however many rows; array columns, which cannot be
    unnested row by row, go through `VALUES`."""
    if not objs:
        return
    meta = type(objs[0])._meta
    cols = [_column(meta, name) for name in fields]
    if any(isinstance(f, ArrayField) for f in cols):
        _rows_update_values(objs, cols, batch_size=batch_size)
        return
    columns_update(
        type(objs[0]), [obj.pk for obj in objs], {f.attname: [getattr(obj, f.attname) for obj in objs] for f in cols}
    )


def columns_update(
    model: type[models.Model],
    pks: Sequence[Any],
    columns: Mapping[str, Sequence[Any]],
    *,
    partition_key: tuple[str, Sequence[Any]] | None = None,
) -> None:
    """rows_update for rows given by primary key and columns (a field's name or attname: one value per
    row), with no model instance per row. Not for array columns.

    `partition_key`: for a partitioned table, the key's field and each row's value of it (the hour rows:
    `("hour", hours)`). Rows are then matched on it too and the statement bounded by its least and greatest
    value, so Postgres reads only the partitions and index range those rows lie in. Without it, a partition
    without statistics (a month's new one; autovacuum off) was joined through a scan of its whole month so
    far: 1,000 GPUs write 24,000 GPU-hours a day."""
    if not pks:
        return
    extra = {partition_key[0]: partition_key[1]} if partition_key else {}
    lengths = {len(values) for values in [*columns.values(), *extra.values()]} | {len(pks)}
    if len(lengths) > 1:
        raise ValueError(f"columns_update: primary keys and columns of different lengths {sorted(lengths)}")
    meta = model._meta
    pk = meta.pk
    cols = [_column(meta, name) for name in columns]
    if any(isinstance(f, ArrayField) for f in cols):
        raise ValueError("columns_update: array columns go through rows_update")
    keys = [_column(meta, name) for name in extra]
    arrays = [f"%b::{pk.db_type(connection)}[]"] + [
        "%b::text[]" if isinstance(f, models.JSONField) else f"%b::{f.db_type(connection)}[]" for f in [*keys, *cols]
    ]
    names = ", ".join([f'"{pk.column}"'] + [f'"{f.column}"' for f in [*keys, *cols]])
    assignments = ", ".join(
        f'"{f.column}" = v."{f.column}"' + ("::jsonb" if isinstance(f, models.JSONField) else "") for f in cols
    )
    match = [f't."{pk.column}" = v."{pk.column}"']
    params = [list(pks)] + [_unnest_values(f, values) for f, values in zip(keys, extra.values(), strict=True)]
    params += [_unnest_values(f, values) for f, values in zip(cols, columns.values(), strict=True)]
    bounds: list[Any] = []
    for f, values in zip(keys, extra.values(), strict=True):
        match.append(f't."{f.column}" = v."{f.column}"')
        match.append(f't."{f.column}" BETWEEN %b::{f.db_type(connection)} AND %b::{f.db_type(connection)}')
        bounds += [min(values), max(values)]
    with _binding_cursor() as cursor:
        cursor.execute(
            f'UPDATE "{meta.db_table}" AS t SET {assignments} '
            f"FROM unnest({', '.join(arrays)}) AS v({names}) "
            f"WHERE {' AND '.join(match)}",
            params + bounds,
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
    row gets every column (the model's defaults included), an existing one only `update_fields`."""
    if not objs:
        return
    meta = type(objs[0])._meta
    cols = [f for f in meta.concrete_fields if not f.primary_key and not f.generated]
    columns_upsert(
        type(objs[0]),
        {f.attname: [getattr(obj, f.attname) for obj in objs] for f in cols},
        unique_fields=unique_fields,
        update_fields=update_fields,
    )


def columns_upsert(
    model: type[models.Model],
    columns: Mapping[str, Sequence[Any]],
    *,
    unique_fields: Sequence[str],
    update_fields: Sequence[str],
) -> None:
    """rows_upsert for rows given as columns (a field's name or attname: one value per row), with no model
    instance per row; a column not given takes its field's default (its database default where it has only
    that, as Django's INSERT does); no `update_fields`: ON CONFLICT DO NOTHING. One array parameter per column
    (`unnest`), so the statement stays small; JSON and array columns, which cannot be unnested as they are,
    travel as JSON text and are rebuilt in the SELECT."""
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns_upsert: columns of different lengths {sorted(lengths)}")
    rows = lengths.pop() if lengths else 0
    if not rows:
        return
    meta = model._meta
    given = {_column(meta, name).attname: values for name, values in columns.items()}
    cols = [
        f
        for f in meta.concrete_fields
        if not f.primary_key and not f.generated and (f.attname in given or not _database_default_only(f))
    ]
    unknown = set(given) - {f.attname for f in cols}
    if unknown:
        raise ValueError(f"columns_upsert: {meta.label} has no column {sorted(unknown)}")
    names = ", ".join(f'"{f.column}"' for f in cols)
    arrays = ", ".join(f"%b::{_unnest_type(f)}[]" for f in cols)
    conflict = ", ".join(f'"{_column(meta, n).column}"' for n in unique_fields)
    updates = ", ".join(f'"{_column(meta, n).column}" = EXCLUDED."{_column(meta, n).column}"' for n in update_fields)
    on_conflict = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
    params = [_unnest_values(f, given[f.attname] if f.attname in given else [f.get_default()] * rows) for f in cols]
    with _binding_cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{meta.db_table}" ({names}) SELECT {", ".join(_rebuilt(f) for f in cols)} '
            f"FROM unnest({arrays}) AS v({names}) "
            f"ON CONFLICT ({conflict}) {on_conflict}",
            params,
        )


def _database_default_only(field: models.Field[Any, Any]) -> bool:
    """A field whose default only the database knows (`db_default`): left out of an INSERT, as Django does."""
    return field.db_default is not models.NOT_PROVIDED and not field.has_default()


def _as_json(field: models.Field[Any, Any]) -> bool:
    return isinstance(field, models.JSONField | ArrayField)


def _unnest_type(field: models.Field[Any, Any]) -> str:
    return "text" if _as_json(field) else str(field.db_type(connection))


def _unnest_values(field: models.Field[Any, Any], raw: Sequence[Any]) -> list[Any]:
    """A column's values as one array parameter: JSON text, or one Python type per array (psycopg refuses
    a list that mixes int and float)."""
    if _as_json(field):
        return [None if v is None else json.dumps(v) for v in raw]
    if isinstance(field, models.FloatField):
        return [None if v is None else float(v) for v in raw]
    if isinstance(field, models.IntegerField | models.BigIntegerField | models.ForeignKey):
        return [None if v is None else int(v) for v in raw]
    if isinstance(field, models.DecimalField):
        return [v if v is None or isinstance(v, Decimal) else Decimal(repr(v)) for v in raw]
    return list(raw)


def _rebuilt(field: models.Field[Any, Any]) -> str:
    """The column as the table wants it, from the unnested value."""
    column = f'v."{field.column}"'
    if isinstance(field, models.JSONField):
        return f"{column}::jsonb"
    if isinstance(field, ArrayField):
        array = f"ARRAY(SELECT jsonb_array_elements_text({column}::jsonb))::{field.db_type(connection)}"
        return f"CASE WHEN {column} IS NULL THEN NULL ELSE {array} END"
    return column
