"""Day numbers in the configured zone (spec §11).

A day number is the count of days since 1970-01-01 of the *local* date in the
zone. Day starts come from the local date (never by adding 86400), so a day
across a DST change is 23 or 25 hours long and its start is still midnight.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def day_of_date(date: dt.date) -> int:
    return date.toordinal() - _EPOCH_ORDINAL


def date_of_day(day: int) -> dt.date:
    return dt.date.fromordinal(_EPOCH_ORDINAL + day)


def day_at(unix_s: float, zone: ZoneInfo) -> int:
    """The day number of the local date at `unix_s` in `zone`."""
    return day_of_date(dt.datetime.fromtimestamp(unix_s, zone).date())


def day_start_unix(day: int, zone: ZoneInfo) -> float:
    """The first instant of the local day.

    fold=0 is right both when midnight is skipped (a spring-forward at 00:00:
    it resolves to the first instant after the gap) and when it repeats (the
    first occurrence).
    """
    midnight = dt.datetime.combine(date_of_day(day), dt.time(0), tzinfo=zone)
    return midnight.timestamp()


def day_start_rfc3339(day: int, zone: ZoneInfo) -> str:
    """The day's start with the zone's offset, e.g. `2026-09-28T00:00:00+07:00`."""
    instant = dt.datetime.fromtimestamp(day_start_unix(day, zone), zone)
    return instant.isoformat(timespec="seconds")


def seconds_to_next_midnight(unix_s: float, zone: ZoneInfo) -> float:
    return day_start_unix(day_at(unix_s, zone) + 1, zone) - unix_s
