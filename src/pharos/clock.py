"""Injected time. Every component that reads the time takes a Clock, so tests step time by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds: for intervals, staleness and durations."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch: for usage days and timestamps shown to people."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


class FakeClock:
    """A clock that moves only when a test calls `advance`."""

    def __init__(
        self, start_monotonic: float = 1000.0, start_wall: float = 1_790_000_000.0
    ) -> None:
        self._monotonic = start_monotonic
        self._wall = start_wall

    def now(self) -> float:
        return self._monotonic

    def time(self) -> float:
        return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._monotonic += seconds
        self._wall += seconds
