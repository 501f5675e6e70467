"""CSV for finance tools: `?format=csv` on any list endpoint. Column names carry their units.

Text is written so that a spreadsheet never runs it: a text cell that starts with `=`, `+`, `-`, `@`, a tab
or a carriage return gets a single quote in front (OWASP's advice on CSV injection), unless it is a plain
number (a money amount such as "-1.50" stays a number). Lines end in CRLF (RFC 4180), so that a carriage
return inside a cell is quoted with it instead of breaking the row."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from typing import Any

from rest_framework.renderers import BaseRenderer

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _cell(value: Any) -> Any:
    """A value as a CSV cell a spreadsheet shows and never evaluates."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def _flatten(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            flat[name] = _cell(
                json.dumps(value) if any(isinstance(v, dict | list) for v in value) else ";".join(map(str, value))
            )
        else:
            flat[name] = "" if value is None else _cell(value)
    return flat


class UnitCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, dict) and "results" in data:
            data = data["results"]
        rows = [data] if isinstance(data, dict) else list(data or [])
        flat = [_flatten(r) for r in rows]
        columns: list[str] = []
        for r in flat:
            columns.extend(c for c in r if c not in columns)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(flat)
        return out.getvalue().encode(self.charset)


def csv_stream(rows: Iterator[dict[str, Any]], columns: list[str]) -> Iterator[str]:
    """CSV text a chunk at a time, for a StreamingHttpResponse: the header, then each row flattened."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\r\n")
    writer.writeheader()
    for n, row in enumerate(rows, 1):
        writer.writerow(_flatten(row))
        if n % 500 == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()
