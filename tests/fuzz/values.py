"""The values both fuzz suites send beside what their strategies make: those that broke a page or an endpoint before
(issue: no input breaks it), so that every run asks them, whatever hypothesis draws."""

from __future__ import annotations

import base64
from datetime import date, datetime

from hypothesis import strategies as st


def _cursor(querystring: str) -> str:
    return base64.b64encode(querystring.encode()).decode()


ODD_STRINGS = ["", "0", "-1", "²", "١٢", "\uff12\uff10\uff12\uff16-11", "1e309", "NaN", "0001-01-01", "9999-12-31",
               "0000-01", "9999-12", "9999-W52", "0001-W01", "2026-02-30", "2026-11-02\n", "2026-11\n",
               "2026-11-02T00:00:00+23:59", "9999-12-31T23:59:59", "9" * 40, "\x00", "a\x00b", "\u202egnp.exe",
               "true", "open", "vision", "x" * 5000, "%00", "../../etc/passwd", "<script>", "' OR 1=1 --"]  # fmt: skip
ODD_CURSORS = [_cursor(q) for q in ("p=garbage", "p=NaN", "p=9999-99-99", "p=" + "9" * 672, "p=a\x00b", "o=-1&r=x")]
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)  # (a client sends UTF-8)
ODD_VALUES = st.one_of(
    st.sampled_from(ODD_STRINGS + ODD_CURSORS),
    TEXT,
    st.dates().map(date.isoformat),
    st.datetimes().map(datetime.isoformat),
    st.integers().map(str),
)

# Each query parameter of the API asked with the values of its kind that broke an endpoint before, one at a time
# (test_api_fuzz.py's sweep): by the parameter's name.
_TIMES = ["0001-01-01", "9999-12-31", "9999-12-30T23:59:59", "2026-11-02\n", "\uff12\uff10\uff12\uff16-11-02",
          "2026-11-02T00:00:00+23:59", "1" * 30, "a\x00b"]  # fmt: skip
_NUMBERS = ["²", "١٢", "9" * 40, "-1", "1e3", "1.5", "%"]
ODD_BY_PARAMETER: dict[str, list[str]] = {
    "start": _TIMES,
    "end": _TIMES,
    "since": _TIMES,
    "week_start": _TIMES,
    "month": ["0000-01", "9999-12", "\uff12\uff10\uff12\uff16-11", "2026-11\n", "2026-13", "a\x00b"],
    "week": ["9999-W52", "0001-W01", "2026-W54", "2026-W48\n", "a\x00b"],
    "cursor": [*ODD_CURSORS, "%%%", "\x00"],
    "page_size": _NUMBERS,
    "older_than_days": _NUMBERS,
    "job": _NUMBERS,
}
ODD_TEXT = ["a\x00b", "x\n", "%", "x" * 5000, "\u202egnp.exe", "' OR 1=1 --"]  # any other parameter
# A period given whole, where an endpoint takes start and end.
ODD_PERIODS = [("9999-12-30", "9999-12-31T23:59:59"), ("0001-01-01", "0001-01-03"), ("2026-11-01", "2026-11-02\n")]
