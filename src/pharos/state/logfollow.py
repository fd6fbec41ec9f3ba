"""The log follower (spec §5): one task per backend whose plan has log probes.

It opens the backend's feed, runs the plan's log probes on each line and keeps the values in
the backend's own log snapshot, apart from the scraped view. When the feed drops, the values
become unknown (never 0) and it reconnects with backoff: 1 s doubling to 30 s. Lines are
matched in memory and dropped: never logged, stored or sent anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pharos.clock import Clock
from pharos.engine import Plan
from pharos.engine.types import Snapshot
from pharos.state.records import BackendRuntime
from pharos.state.registry import TargetRegistry
from pharos.state.rounds import Decide, apply_log_line
from pharos.state.spec import StateOptions

log = logging.getLogger("pharos.state")

FollowLineFn = Callable[[Plan, bytes], Snapshot | None]
LogFeedOpener = Callable[[str], Awaitable[AsyncIterator[bytes]]]
"""Opens a log feed URL (raises on failure); the iterator yields lines and ends when it drops."""
SleepFn = Callable[[float], Awaitable[None]]
Prepare = Callable[[BackendRuntime, Snapshot, float], Snapshot]  # aliases and `at`


class LogFollower:
    def __init__(
        self,
        clock: Clock,
        options: StateOptions,
        registry: TargetRegistry,
        open_feed: LogFeedOpener,
        follow_line: FollowLineFn,
        prepare: Prepare,
        decide: Decide,
        sleep: SleepFn,
    ) -> None:
        self._clock = clock
        self._options = options
        self._registry = registry
        self._open_feed = open_feed
        self._follow_line = follow_line
        self._prepare = prepare
        self._decide = decide
        self._sleep = sleep

    async def run(self, backend: BackendRuntime) -> None:
        start_s = self._options.log_backoff_start_s
        backoff_s = start_s
        while True:
            if await self.session(backend):
                backoff_s = start_s
            await self._sleep(backoff_s)
            backoff_s = min(backoff_s * 2.0, self._options.log_backoff_max_s)

    async def session(self, backend: BackendRuntime) -> bool:
        """Follow the feed until it drops; True if it connected."""
        url = backend.spec.url
        feed = backend.spec.log_feed
        if feed is None:
            return False
        try:
            lines = await self._open_feed(feed)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._decide(url, "log_feed", "open_failed")
            log.info("backend %s log feed %s: open failed: %s", url, feed, error)
            return False
        backend.log_connected = True
        self._decide(url, "log_feed", "connected")
        ended = True
        try:
            async for line in lines:
                self._line(backend, line)
        except asyncio.CancelledError:
            ended = False
            raise
        except Exception as error:
            log.info("backend %s log feed dropped: %s", url, type(error).__name__)
        finally:
            backend.log_connected = False
            backend.log_snapshot = None
            closer: Any = getattr(lines, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()
            if ended:
                self._decide(url, "log_feed", "ended")
        return True

    def _line(self, backend: BackendRuntime, line: bytes) -> None:
        plan = backend.plan
        if plan is None:
            return
        try:
            found = self._follow_line(plan, line)
        except Exception:  # a matching line with an unusable value; the line is not kept
            return
        if found is None:
            return
        now = self._clock.now()
        found = self._prepare(backend, found, now)
        apply_log_line(self._registry, backend, found, now, decide=self._decide)
