"""`field__any=values`: `field = ANY(%s::type[])`, the values as one array parameter.

For the ingest's lists of hundreds of job and GPU ids: Django's `__in` writes one placeholder per value,
and building, then splitting, a statement of a thousand placeholders cost more Python than the query
itself took in Postgres (about 0.3 s per cluster-hour of 1,000 GPUs under a profiler). Postgres plans
`IN (a, b, ...)` as `= ANY('{a,b,...}')` anyway, so the plans and the rows are the same. An empty list
skips the query as `__in` does (EmptyResultSet), so the same statements run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, ForeignObject, Lookup
from django.db.models.sql.compiler import SQLCompiler


@ForeignObject.register_lookup  # a relation's lookups are its own (`job_id__any`)
@Field.register_lookup
class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def get_prep_lookup(self) -> list[Any]:
        if not isinstance(self.rhs, Iterable) or isinstance(self.rhs, str | bytes):
            raise TypeError(f"__any takes a list of values, not {type(self.rhs).__name__}")
        field = self.lhs.output_field
        return [field.get_prep_value(v) for v in self.rhs]

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> tuple[str, tuple[Any, ...]]:
        if not self.rhs:
            raise EmptyResultSet
        lhs, lhs_params = self.process_lhs(compiler, connection)
        field = self.lhs.output_field
        values = [field.get_db_prep_value(v, connection, prepared=True) for v in self.rhs]
        return f"{lhs} = ANY(%s::{field.db_type(connection)}[])", (*lhs_params, values)
