"""Which week a report covers and when it is due, in a site's time zone (pure: no ORM).

A report week runs from Monday 00:00 to the next Monday 00:00, local time (167 or 169 hours across a
daylight-saving change). It is due FLEETWATT_REPORT_WEEKDAY days and FLEETWATT_REPORT_HOUR hours after
it ends (default: the next Monday, 07:00 local)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone(name: str) -> ZoneInfo:
    """The IANA zone, UTC for an empty or unknown name (a typo in a site must not stop every report)."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def week_monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def week_window(week_start: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[start, end) of the local week in UTC."""
    start = datetime.combine(week_start, time(0), tzinfo=tz)
    end = datetime.combine(week_start + timedelta(days=7), time(0), tzinfo=tz)
    return start.astimezone(UTC), end.astimezone(UTC)


def day_windows(week_start: date, tz: ZoneInfo) -> list[tuple[date, datetime, datetime]]:
    """The week's seven local days, each as [start, end) in UTC."""
    out = []
    for k in range(7):
        day = week_start + timedelta(days=k)
        start = datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)
        end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz).astimezone(UTC)
        out.append((day, start, end))
    return out


def week_due(*, now: datetime, tz: ZoneInfo, weekday: int = 0, hour: int = 7) -> date:
    """The Monday of the latest week whose report is due at `now`: the week that ended before the last
    local send time (weekday, hour) that has passed. Before Monday 07:00 that is the week before last
    (already sent, so a run then does nothing); from 07:00 on, the week that just ended."""
    local = now.astimezone(tz).replace(tzinfo=None)  # wall-clock arithmetic, whatever the offset
    shifted = local - timedelta(days=weekday, hours=hour)
    return week_monday(shifted.date()) - timedelta(days=7)


def next_send(*, now: datetime, tz: ZoneInfo, weekday: int = 0, hour: int = 7) -> tuple[datetime, date]:
    """When the next report goes out after `now` (local, aware) and the Monday of the week it covers: the
    first local (weekday, hour) after the week that is due now."""
    covered = week_due(now=now, tz=tz, weekday=weekday, hour=hour) + timedelta(days=7)
    send_day = covered + timedelta(days=7 + weekday)
    return datetime.combine(send_day, time(hour), tzinfo=tz), covered


def week_label(week_start: date) -> str:
    """'26 Oct – 1 Nov 2026'."""
    last = week_start + timedelta(days=6)
    if week_start.year != last.year:
        return f"{week_start.day} {week_start:%b %Y} – {last.day} {last:%b %Y}"
    if week_start.month != last.month:
        return f"{week_start.day} {week_start:%b} – {last.day} {last:%b %Y}"
    return f"{week_start.day} – {last.day} {last:%b %Y}"
