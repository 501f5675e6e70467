"""Arguments of the management commands, read strictly: one clear line for a bad value, never a traceback."""

from __future__ import annotations

from datetime import datetime

from django.core.management.base import CommandError


def aware_time_arg(value: str, flag: str, *, error: type[Exception] = CommandError) -> datetime:
    """An ISO 8601 time with a zone (`Z` or an offset); a naive one would be compared with aware ones. A bad
    one raises `error` (a command that speaks as another program raises that program's kind of error)."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise error(f"{flag} {value!r} is not an ISO 8601 time such as 2026-11-02T00:00:00Z.") from None
    if moment.tzinfo is None:
        raise error(f"{flag} {value} has no time zone; add Z or an offset such as +01:00.")
    return moment
