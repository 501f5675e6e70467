"""Query and form parameters of the pages, read with apps.core.web.params: a value a page cannot read is a clear
400 (a page that names the parameter and says what it takes), never a 500 nor a silent default."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date
from decimal import Decimal
from functools import wraps
from typing import Any

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import render

from . import params
from .params import QueryError

__all__ = [
    "QueryError",
    "amount_param",
    "bad_query_is_400",
    "currency_param",
    "date_param",
    "filters_checked",
    "id_param",
    "text_param",
]


def _raw(values: Mapping[str, Any], name: str) -> str:
    """The parameter's value as sent ("" when absent); several values of one parameter: the last (Django's)."""
    raw = values.get(name)
    return raw if isinstance(raw, str) else ""


def id_param(values: Mapping[str, Any], name: str) -> int | None:
    """An object's id, or None when the parameter is absent or empty."""
    raw = _raw(values, name)
    return params.object_id(raw, name=name) if raw else None


def date_param(values: Mapping[str, Any], name: str) -> date | None:
    """A day as YYYY-MM-DD, or None when the parameter is absent or empty (a cleared date field)."""
    raw = _raw(values, name)
    return params.day(raw, name=name) if raw else None


def amount_param(values: Mapping[str, Any], name: str) -> Decimal:
    """An amount of money, 0 or more (required: an absent one is an error, as a wrong one)."""
    return params.amount(_raw(values, name), name=name)


def currency_param(values: Mapping[str, Any], name: str) -> str:
    """A currency's three-letter code (required)."""
    return params.currency(_raw(values, name), name=name)


def text_param(values: Mapping[str, Any], name: str, *, max_length: int = params.TEXT_MAX, lines: bool = False) -> str:
    """Free text ("" when absent), as apps.core.web.params.text reads it."""
    return params.text(_raw(values, name), name=name, max_length=max_length, lines=lines)


def filters_checked(filterset: Any) -> None:
    """A page's django-filter FilterSet, whose invalid values it would otherwise ignore: QueryError."""
    if not filterset.is_valid():
        errors = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in filterset.errors.items())
        raise QueryError("", errors)


def bad_query_is_400(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """The page answers a QueryError with a 400 page that says what was wrong."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except QueryError as exc:
            return render(request, "bad_request.html", {"error": str(exc)}, status=400)

    return wrapped
