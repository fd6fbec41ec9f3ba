"""An asyncio event loop on virtual time: when nothing is ready, time jumps to the next timer.

The simulator runs the real scheduler, prefix index and policy as they run in `serve`,
so it needs real coroutines and futures, but not real seconds: a 10-minute scenario of
a dozen users takes well under a second of CPU. Nothing in a simulation does real I/O;
the only file descriptor the selector sees is asyncio's own self-pipe.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Deadlock(RuntimeError):
    """Every task waits on something no timer will ever set."""


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.virtual_now_s = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            raise Deadlock("no task is ready and no timer is set")
        self.virtual_now_s += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(self._jumping)

    def time(self) -> float:
        return self._jumping.virtual_now_s


class VirtualClock:
    """pharos.clock.Clock over the loop's virtual time (wall time starts at a fixed epoch)."""

    def __init__(self, loop: VirtualTimeLoop, wall_start_s: float = 1_790_000_000.0) -> None:
        self._loop = loop
        self._wall_start_s = wall_start_s

    def now(self) -> float:
        return self._loop.time()

    def time(self) -> float:
        return self._wall_start_s + self._loop.time()


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()
