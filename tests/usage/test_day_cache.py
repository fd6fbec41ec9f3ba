"""The book's day number, kept per unix second, is day_at's at every instant around midnights
and clock changes, in zones whose offsets are hours, half hours, 45 minutes or (before 1900)
odd seconds, with the clock read at fractions of a second and going back."""

from __future__ import annotations

import datetime as dt
import random
from zoneinfo import ZoneInfo

import pytest

from pharos.usage import UsageBook
from pharos.usage.days import day_at, day_start_unix


class FixedClock:
    def now(self) -> float:
        return 0.0

    def time(self) -> float:
        return 0.0


@pytest.mark.parametrize(
    "zone_name",
    [
        "UTC",
        "Europe/Berlin",  # DST at 02:00 / 03:00
        "America/Sao_Paulo",  # DST that started at midnight (until 2019): 00:00 never happened
        "America/Havana",  # DST at midnight, both ways
        "Asia/Kolkata",  # +05:30
        "Pacific/Chatham",  # +12:45 / +13:45
        "Europe/Amsterdam",  # +00:19:32 local mean time before 1937
    ],
)
def test_the_kept_day_is_day_at_around_every_midnight_and_clock_change(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    book = UsageBook(FixedClock(), zone, origin=1)
    rng = random.Random(zone_name)
    instants: list[float] = []
    for year in (1930, 2016, 2018, 2026):
        first = dt.date(year, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
        for day in range(first, first + 366, 3):
            midnight = day_start_unix(day, zone)
            instants += [midnight + offset for offset in (-1.0, -0.5, -1e-6, 0.0, 0.25, 0.999)]
            instants += [midnight + rng.uniform(0, 86_400) for _ in range(2)]
    rng.shuffle(instants[: len(instants) // 2])  # half in order, half jumping back and forth
    for instant in instants:
        assert book._day_at(instant) == day_at(instant, zone), (zone_name, instant)
