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


def numeric_sums(*, columns: Iterable[str] = FOOTPRINT_COLUMNS) -> dict[str, Expression]:
    """footprint_sums left exact (`numeric`), for sums to be added up again in the database and read as floats
    only then: the same to the last bit as one sum of every row."""
    return {
        name: Sum(name) if name in _MONEY_COLUMNS else Sum(Cast(F(name), output_field=_Numeric())) for name in columns
    }


# Half-even rounding of costs in Postgres, exact: costs have 6 decimal places (the columns'), so in millionths
# they are integers. With d = 10^(6 - exponent) millionths to the minor unit, q = floor(m / d) and r the remainder,
# the cost in whole minor units is q, plus one if r is over half of d, or exactly half with q odd (bigint
# arithmetic: quicker than numeric's). `HALF_EVEN_QR` gives q and r from m and d, `HALF_EVEN_UNITS` the units
# (SQL fragments for a query run with parameters: `%%` is a literal `%`).
HALF_EVEN_QR = "(m - ((m %% d) + d) %% d) / d AS q, ((m %% d) + d) %% d AS r"
HALF_EVEN_UNITS = "q + CASE WHEN 2 * r > d OR (2 * r = d AND q %% 2 <> 0) THEN 1 ELSE 0 END"
