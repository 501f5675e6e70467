"""Arguments of the management commands, read strictly: one clear line for a bad value, never a traceback."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

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


def utc_time_arg(value: str, flag: str, *, example: str) -> datetime:
    """An ISO 8601 time, in UTC where it says no zone, returned in UTC (for options documented so)."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{flag}: {value!r} is not an ISO 8601 time (e.g. {example})") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def text_file_arg(path: Path, *, what: str, limit: int, limit_setting: str) -> str:
    """A UTF-8 text file (a BOM allowed) of at most `limit` bytes, its size checked before it is read into memory;
    anything else is one clear line, and nothing was imported."""
    try:
        if (size := path.stat().st_size) > limit:
            raise CommandError(f"{path}: {size:,} bytes; {what} is at most {limit:,} ({limit_setting})")
        return path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise CommandError(f"{path}: cannot read it: {exc}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text ({exc}); nothing was imported") from None
