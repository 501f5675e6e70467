"""The footprint's sums in the database: one annotation for every read that adds job rows up."""

from __future__ import annotations

from django.db.models import Q, Sum

from .footprint import FOOTPRINT_COLUMNS


def footprint_sums(*, path: str = "", filter: Q | None = None) -> dict[str, Sum]:  # `filter`: Django's name
    """`{column: Sum(path + column)}` for every footprint column, to pass to `.annotate()` or
    `.aggregate()`; read the row back with `Footprint.from_sums`. `path` reaches the job rows from
    another model (e.g. "gpu_hours_rows__")."""
    return {name: Sum(path + name, filter=filter) for name in FOOTPRINT_COLUMNS}
