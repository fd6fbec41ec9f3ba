"""The /status usage chart: tokens per day as SVG bars, laid out here so the template only draws."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from pharos.usage.report import DailyRow

CHART_WIDTH = 600.0
CHART_HEIGHT = 120.0
_BAR_GAP = 2.0


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    day: str
    tokens: int
    requests: int
    unmetered: int


@dataclass(frozen=True, slots=True)
class Chart:
    width: float
    height: float
    bars: tuple[Bar, ...]
    first: str
    last: str
    peak_tokens: int
    total_tokens: int
    total_requests: int


def daily_chart(rows: Iterable[DailyRow], first: dt.date, last: dt.date) -> Chart:
    """One bar per day from `first` to `last` (inclusive), scaled to the busiest day."""
    days = (last - first).days + 1
    tokens = [0] * days
    requests = [0] * days
    unmetered = [0] * days
    for row in rows:
        index = (dt.date.fromisoformat(row.day[:10]) - first).days
        if 0 <= index < days:
            tokens[index] += row.prompt_tokens + row.completion_tokens
            requests[index] += row.requests
            unmetered[index] += row.unmetered
    peak = max(tokens, default=0)
    slot = CHART_WIDTH / days
    bars = []
    for index in range(days):
        bar_h = 0.0 if peak == 0 else CHART_HEIGHT * tokens[index] / peak
        if tokens[index] > 0:
            bar_h = max(bar_h, 1.5)  # a day with traffic stays visible beside a huge one
        bars.append(
            Bar(
                x=round(index * slot, 2),
                y=round(CHART_HEIGHT - bar_h, 2),
                w=round(max(slot - _BAR_GAP, 1.0), 2),
                h=round(bar_h, 2),
                day=(first + dt.timedelta(days=index)).isoformat(),
                tokens=tokens[index],
                requests=requests[index],
                unmetered=unmetered[index],
            )
        )
    return Chart(
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        bars=tuple(bars),
        first=first.isoformat(),
        last=last.isoformat(),
        peak_tokens=peak,
        total_tokens=sum(tokens),
        total_requests=sum(requests),
    )
