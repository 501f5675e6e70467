"""The footprint's sums in the database: one annotation for every read that adds job rows up.

Float columns are summed as exact decimals and read back as floats, so a sum is the same to the last bit
whatever order Postgres meets the rows in (an upsert moves rows on disk): re-ingesting an hour must give
the same figures, not the same figures but for their last digit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import models
from django.db.models import Expression, F, Q, Sum
from django.db.models.functions import Cast

from .footprint import FOOTPRINT_COLUMNS

_MONEY_COLUMNS = {"cost"}  # numeric already: its sum is exact as it is


class _Numeric(models.DecimalField):
    """Postgres's unbounded `numeric`: every float8 converts to it exactly enough to add without drift."""

    def db_type(self, connection: Any) -> str:
        return "numeric"


def exact_sum(name: str, *, filter: Q | None = None) -> Expression:  # `filter`: Django's name
    """SUM(column) of a float column, independent of the order of the rows."""
    return Cast(Sum(Cast(F(name), output_field=_Numeric()), filter=filter), output_field=models.FloatField())


def footprint_sums(
    *, path: str = "", filter: Q | None = None, columns: Iterable[str] = FOOTPRINT_COLUMNS
) -> dict[str, Expression]:  # `filter`: Django's name
    """`{column: sum}` for every footprint column (or those of `columns` a table has), to pass to `.annotate()`
    or `.aggregate()`; read the row back with `Footprint.from_sums`. `path` reaches the job rows from another
    model (e.g. "gpu_hours_rows__")."""
    return {
        name: Sum(path + name, filter=filter) if name in _MONEY_COLUMNS else exact_sum(path + name, filter=filter)
        for name in columns
    }
