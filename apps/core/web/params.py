"""Every value a client sends (a query or form parameter, a cursor, a part of a path), read here, once, strictly:
ASCII digits only (`\\d` and `int()` take full-width and Arabic-Indic digits, `isdigit()` takes "²"), the whole
value (`$` matches before a trailing newline: `fullmatch` is used), years bounded, no NUL byte (Postgres text cannot
hold one) nor, in a one-line text, any control character. A value that is not what its parameter takes is a
QueryError naming the parameter: the pages answer it with their 400 page (apps.core.web.query), the API with a 400 whose
key is the parameter (apps.core.web.fields, apps.core.web.filtersets, apps.core.web.pagination). Pure: no Django.

Years: 2000 to 2100. The fleet's data starts in this century (a GPU's energy counter is younger than that), and
the arithmetic on a period (a month or a week on either side, a rollup's days) stays inside the calendar. A
cursor's position is the list's own value, read with the database's bounds instead (it is written by the list)."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal

YEAR_MIN = 2000
YEAR_MAX = 2100
DAY_MIN = date(YEAR_MIN, 1, 1)
DAY_MAX = date(YEAR_MAX, 12, 31)
MOMENT_MIN = datetime(YEAR_MIN, 1, 1, tzinfo=UTC)
MOMENT_MAX = datetime(YEAR_MAX + 1, 1, 1, tzinfo=UTC)  # the end of the last day: an exclusive end may name it
# A cursor's position: what Python's datetime holds with a day to spare on either side for an offset.
POSITION_MIN = datetime(1, 1, 2, tzinfo=UTC)
POSITION_MAX = datetime(9999, 12, 30, tzinfo=UTC)
ID_MAX = 2**63 - 1  # Postgres bigint
ID_PATTERN = "[0-9]{1,19}"  # an id in a path (the API's routers): ASCII digits, no more than a bigint has
TEXT_MAX = 200  # a one-line text (a search, a name, a filter's value) unless its parameter says otherwise
POSITION_TEXT_MAX = 1000
CURSOR_MAX_CHARS = 4000  # a cursor as the lists write it: base64 of the position, offset and direction

_WHOLE = re.compile(r"[0-9]{1,19}")
_DAY = r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
_DAY_RE = re.compile(_DAY)
_MOMENT_RE = re.compile(
    _DAY + r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]{1,6}))?)?"
    r"(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)
_MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")
_WEEK_RE = re.compile(r"([0-9]{4})-W([0-9]{2})")
_LINE_BREAKS = frozenset("\t\n\r")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
# An amount of money as a person types it: digits, an optional decimal point; no sign, exponent, NaN or infinity
# (Decimal() reads all of those).
_AMOUNT = re.compile(r"[0-9]{1,12}(?:\.[0-9]{0,6})?")
_CURRENCY = re.compile(r"[A-Z]{3}")


class QueryError(ValueError):
    """A value its parameter does not take; `name` is the parameter ("" where the caller names it)."""

    def __init__(self, name: str, message: str) -> None:
        self.name, self.message = name, message
        super().__init__(f"{name}: {message}" if name else message)

    @property
    def sentence(self) -> str:
        """The message alone, as a sentence (the API puts it under the parameter's name)."""
        return self.message[:1].upper() + self.message[1:]


def whole_number(raw: str, *, name: str, low: int, high: int) -> int:
    """`raw` as an integer from `low` to `high`, written in ASCII digits alone."""
    if not isinstance(raw, str) or not _WHOLE.fullmatch(raw) or not low <= int(raw) <= high:
        raise QueryError(name, f"a whole number from {low:,} to {high:,}.")
    return int(raw)


def object_id(raw: str, *, name: str) -> int:
    """An object's id: a whole number from 1 to the largest bigint."""
    return whole_number(raw, name=name, low=1, high=ID_MAX)


def amount(raw: str, *, name: str) -> Decimal:
    """An amount of money, 0 or more: digits with an optional decimal point ("1", "0.50"), at most 12 digits before
    it and 6 after (as costs are stored)."""
    if not isinstance(raw, str) or not _AMOUNT.fullmatch(raw):
        raise QueryError(name, f"an amount of money, 0 or more, in digits, e.g. 1 or 0.50 (got {_shown(str(raw))}).")
    return Decimal(raw)


def currency(raw: str, *, name: str) -> str:
    """A currency's ISO 4217 code: three capital letters (EUR)."""
    if not isinstance(raw, str) or not _CURRENCY.fullmatch(raw):
        raise QueryError(name, f"a currency's three-letter code, e.g. EUR (got {_shown(str(raw))}).")
    return raw


def _shown(raw: str) -> str:
    """The value as an error message quotes it: short, its control characters escaped."""
    return repr(raw[:40])


def day(raw: str, *, name: str, low: date = DAY_MIN, high: date = DAY_MAX) -> date:
    """A day as YYYY-MM-DD."""
    match = _DAY_RE.fullmatch(raw) if isinstance(raw, str) else None
    try:
        if match is None:
            raise ValueError
        value = date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        raise QueryError(name, f"a day as YYYY-MM-DD (got {_shown(str(raw))}).") from None
    if not low <= value <= high:
        raise QueryError(name, f"a day from {low} to {high}.")
    return value


def moment(raw: str, *, name: str, low: datetime = MOMENT_MIN, high: datetime = MOMENT_MAX) -> datetime:
    """A time as ISO 8601 (YYYY-MM-DD, or with THH:MM[:SS[.ffffff]] and an optional Z or offset; a space for the
    T as Python writes one), in UTC: without an offset it is UTC, with one it is moved to UTC."""
    match = _MOMENT_RE.fullmatch(raw) if isinstance(raw, str) else None
    try:
        if match is None:
            raise ValueError
        year, month_, day_, hour, minute, second, fraction, offset = match.groups()
        value = datetime.combine(
            date(int(year), int(month_), int(day_)),
            time(
                int(hour or 0),
                int(minute or 0),
                int(second or 0),
                int((fraction or "0").ljust(6, "0")),
                tzinfo=_zone(offset),
            ),
        ).astimezone(UTC)
    except (ValueError, OverflowError):
        raise QueryError(
            name, f"a time as ISO 8601, e.g. 2026-11-02 or 2026-11-02T08:00:00Z (got {_shown(str(raw))})."
        ) from None
    if not low <= value <= high:
        raise QueryError(name, f"a time from {low:%Y-%m-%d} to {high:%Y-%m-%d}.")
    return value


def _zone(offset: str | None) -> timezone:
    if offset is None or offset == "Z":
        return UTC
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(offset)
    delta = timedelta(hours=hours, minutes=minutes)
    return timezone(-delta if offset[0] == "-" else delta)


def month(raw: str, *, name: str) -> date:
    """A calendar month as YYYY-MM: its first day."""
    match = _MONTH_RE.fullmatch(raw) if isinstance(raw, str) else None
    if match is None or not 1 <= int(match[2]) <= 12:
        raise QueryError(name, f"a month as YYYY-MM, e.g. 2026-11 (got {_shown(str(raw))}).")
    if not YEAR_MIN <= int(match[1]) <= YEAR_MAX:
        raise QueryError(name, f"a month from {YEAR_MIN}-01 to {YEAR_MAX}-12.")
    return date(int(match[1]), int(match[2]), 1)


def month_after(first: date) -> date:
    """The first day of the month after the one `first` begins."""
    return date(first.year + first.month // 12, first.month % 12 + 1, 1)


def iso_week(raw: str, *, name: str) -> date:
    """An ISO week as YYYY-Www: its Monday."""
    match = _WEEK_RE.fullmatch(raw) if isinstance(raw, str) else None
    try:
        if match is None:
            raise ValueError
        monday = date.fromisocalendar(int(match[1]), int(match[2]), 1)
    except ValueError:
        raise QueryError(name, f"an ISO week as YYYY-Www, e.g. 2026-W48 (got {_shown(str(raw))}).") from None
    if not YEAR_MIN <= int(match[1]) <= YEAR_MAX:
        raise QueryError(name, f"a week from {YEAR_MIN}-W01 to {YEAR_MAX}-W52.")
    return monday


def text(raw: str, *, name: str, max_length: int = TEXT_MAX, lines: bool = False) -> str:
    """Free text as given (a search, a name, a reason): at most `max_length` characters, no NUL byte, no
    unpaired surrogate (neither can be stored), and no other control character but, where `lines`, tabs and
    line breaks."""
    if not isinstance(raw, str):
        raise QueryError(name, "text.")
    if len(raw) > max_length:
        raise QueryError(name, f"at most {max_length:,} characters.")
    for char in raw:
        category = unicodedata.category(char)
        if char == "\x00" or category == "Cs" or (category == "Cc" and not (lines and char in _LINE_BREAKS)):
            kind = "a NUL byte" if char == "\x00" else "a control character" if category == "Cc" else "a lone surrogate"
            raise QueryError(name, f"text without {kind} ({char!r}).")
    return raw


def stored_text(raw: str, *, name: str, max_length: int = POSITION_TEXT_MAX) -> str:
    """Text to compare with what is stored (a cursor's position): only what Postgres cannot hold is refused."""
    if not isinstance(raw, str) or len(raw) > max_length:
        raise QueryError(name, f"text of at most {max_length:,} characters.")
    if "\x00" in raw or any(unicodedata.category(c) == "Cs" for c in raw):
        raise QueryError(name, "text without a NUL byte or a lone surrogate.")
    return raw


def cursor(raw: str, *, name: str) -> str:
    """A list's cursor, as a page's `next` or `previous` link holds it: base64, at most CURSOR_MAX_CHARS. (What it
    holds is read by the list: its position as position_moment, position_day or stored_text.)"""
    if not isinstance(raw, str) or len(raw) > CURSOR_MAX_CHARS or not _BASE64.fullmatch(raw):
        raise QueryError(name, "a cursor as a page's `next` or `previous` link holds it.")
    return raw


def position_moment(raw: str, *, name: str) -> datetime:
    """A cursor's position on a time (as the list wrote it, `str(datetime)`), within the database's range."""
    return moment(raw, name=name, low=POSITION_MIN, high=POSITION_MAX)


def position_day(raw: str, *, name: str) -> date:
    """A cursor's position on a day, within the database's range."""
    return day(raw, name=name, low=POSITION_MIN.date(), high=POSITION_MAX.date())
