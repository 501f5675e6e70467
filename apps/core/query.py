"""Query and form parameters of the pages, read strictly: a value a page cannot read is a clear 400 (a page
that names the parameter and says what it takes), never a 500 nor a silent default. The API's own
parameters are read by its serializers and filtersets."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import date
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

# Days outside these are refused: no page has data there, and the arithmetic on them (a week or a month on
# either side) would leave the calendar.
DATE_MIN = date(1970, 1, 1)
DATE_MAX = date(9998, 12, 31)
ID_MAX = 2**63 - 1  # Postgres bigint
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_WHOLE = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "²", which int() refuses


class QueryError(ValueError):
    """A parameter a page cannot read; the message names it."""


def whole_number(raw: str, *, name: str, low: int, high: int) -> int:
    """`raw` as an integer from `low` to `high`, written in ASCII digits alone."""
    if not _WHOLE.fullmatch(raw) or not low <= int(raw) <= high:
        raise QueryError(f"{name}: a whole number from {low:,} to {high:,}.")
    return int(raw)


def id_param(params: Mapping[str, Any], name: str) -> int | None:
    """An object's id, or None when the parameter is absent or empty."""
    raw = params.get(name) or ""
    return whole_number(raw, name=name, low=1, high=ID_MAX) if raw else None


def date_param(params: Mapping[str, Any], name: str) -> date | None:
    """A day as YYYY-MM-DD, or None when the parameter is absent or empty (a cleared date field)."""
    raw = params.get(name) or ""
    if not raw:
        return None
    try:
        if not _DATE.fullmatch(raw):
            raise ValueError
        day = date.fromisoformat(raw)
    except ValueError:
        raise QueryError(f"{name}: a day as YYYY-MM-DD (got {raw[:40]!r}).") from None
    if not DATE_MIN <= day <= DATE_MAX:
        raise QueryError(f"{name}: a day from {DATE_MIN} to {DATE_MAX}.")
    return day


def filters_checked(filterset: Any) -> None:
    """A page's django-filter FilterSet, whose invalid values it would otherwise ignore: QueryError."""
    if not filterset.is_valid():
        errors = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in filterset.errors.items())
        raise QueryError(errors)


def bad_query_is_400(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The page answers a QueryError with a 400 page that says what was wrong."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except QueryError as exc:
            return render(request, "bad_request.html", {"error": str(exc)}, status=400)

    return wrapped
