import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from pharos.usage.days import (
    date_of_day,
    day_at,
    day_of_date,
    day_start_rfc3339,
    day_start_unix,
    seconds_to_next_midnight,
)

BANGKOK = ZoneInfo("Asia/Bangkok")
NEW_YORK = ZoneInfo("America/New_York")
SANTIAGO = ZoneInfo("America/Santiago")  # skips midnight itself on its spring-forward day


def local(
    zone: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> float:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=zone).timestamp()


def test_day_zero_is_the_epoch_date() -> None:
    assert day_of_date(dt.date(1970, 1, 1)) == 0
    assert date_of_day(day_of_date(dt.date(2026, 9, 28))) == dt.date(2026, 9, 28)


def test_day_follows_the_local_date_not_utc() -> None:
    # 23:59 in Bangkok is 16:59 UTC the same date; 00:00 is 17:00 UTC the day before.
    before = local(BANGKOK, 2026, 9, 27, 23, 59)
    after = local(BANGKOK, 2026, 9, 28, 0, 0)
    assert day_at(before, BANGKOK) == day_of_date(dt.date(2026, 9, 27))
    assert day_at(after, BANGKOK) == day_of_date(dt.date(2026, 9, 28))
    assert day_at(after, ZoneInfo("UTC")) == day_of_date(dt.date(2026, 9, 27))


def test_day_start_carries_the_zone_offset() -> None:
    day = day_of_date(dt.date(2026, 9, 28))
    assert day_start_rfc3339(day, BANGKOK) == "2026-09-28T00:00:00+07:00"
    assert day_start_rfc3339(day, NEW_YORK) == "2026-09-28T00:00:00-04:00"
    assert day_start_rfc3339(day_of_date(dt.date(2026, 1, 5)), NEW_YORK) == (
        "2026-01-05T00:00:00-05:00"
    )


@pytest.mark.parametrize(
    ("date", "hours"),
    [
        (dt.date(2026, 3, 8), 23),  # spring forward
        (dt.date(2026, 11, 1), 25),  # fall back
        (dt.date(2026, 6, 1), 24),
    ],
)
def test_new_york_day_lengths_across_dst(date: dt.date, hours: int) -> None:
    day = day_of_date(date)
    assert day_start_unix(day + 1, NEW_YORK) - day_start_unix(day, NEW_YORK) == hours * 3600


def test_skipped_midnight_starts_the_day_at_the_first_real_instant() -> None:
    day = day_of_date(dt.date(2026, 9, 6))
    assert day_start_rfc3339(day, SANTIAGO) == "2026-09-06T01:00:00-03:00"
    start = day_start_unix(day, SANTIAGO)
    assert day_at(start, SANTIAGO) == day
    assert day_at(start - 1, SANTIAGO) == day - 1


def test_seconds_to_next_midnight_counts_a_short_dst_day() -> None:
    half_past_midnight = local(NEW_YORK, 2026, 3, 8, 0, 30)
    assert seconds_to_next_midnight(half_past_midnight, NEW_YORK) == 23 * 3600 - 1800
    fall_back = local(NEW_YORK, 2026, 11, 1, 0, 30)
    assert seconds_to_next_midnight(fall_back, NEW_YORK) == 25 * 3600 - 1800
