"""Daily usage rows for /usage and /status: per-day sums over every origin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal
from zoneinfo import ZoneInfo

import msgspec

from pharos.usage.cells import Cell
from pharos.usage.days import day_start_rfc3339

GroupBy = Literal["key", "model"]
GROUPINGS: Final = ("key", "model")

# [requests, prompt_tokens, cached_tokens, completion_tokens, unmetered]
Counts = list[int]
REQUESTS, PROMPT, CACHED, COMPLETION, UNMETERED = range(5)


class DailyRow(msgspec.Struct, frozen=True, omit_defaults=True):
    """One day of one key (by="key") or one model (by="model"); the other name is None."""

    day: str  # the day's start in RFC 3339 with the zone's offset
    key: str | None = None
    model: str | None = None
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    unmetered: int = 0


def counts_of(cell: Cell | None) -> Counts:
    if cell is None:
        return [0, 0, 0, 0, 0]
    return [
        cell.requests,
        cell.prompt_tokens,
        cell.cached_tokens,
        cell.completion_tokens,
        cell.unmetered,
    ]


def add_counts(sums: dict[str, Counts], name: str, delta: Sequence[int]) -> None:
    acc = sums.get(name)
    if acc is None:
        acc = sums[name] = [0, 0, 0, 0, 0]
    for index, value in enumerate(delta):
        acc[index] += value


def daily_rows(
    days: Iterable[tuple[int, Mapping[str, Sequence[int]]]], zone: ZoneInfo, by: GroupBy
) -> list[DailyRow]:
    """Rows from per-day sums by name, in the order given, names sorted within a day."""
    if by not in GROUPINGS:
        raise ValueError(f"by must be 'key' or 'model', not {by!r}")
    rows: list[DailyRow] = []
    for day, sums in days:
        if not sums:
            continue
        start = day_start_rfc3339(day, zone)
        for name in sorted(sums):
            counts = sums[name]
            rows.append(
                DailyRow(
                    day=start,
                    key=name if by == "key" else None,
                    model=name if by == "model" else None,
                    requests=counts[REQUESTS],
                    prompt_tokens=counts[PROMPT],
                    cached_tokens=counts[CACHED],
                    completion_tokens=counts[COMPLETION],
                    unmetered=counts[UNMETERED],
                )
            )
    return rows
