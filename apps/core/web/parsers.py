"""Request bodies of the API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's, except that a body nested deeper than Python's recursion limit (`[[[[...]]]]`, which `json`
    answers with a RecursionError) is a 400 like any other unreadable body, not a 500."""

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deep.") from None
