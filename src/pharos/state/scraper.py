"""The scraper (spec §5): each backend's rounds, its up/down marks and its log follower task.

A round resolves the backend's plan when one is due, else scrapes with it (a full round every
`rounds_per_full`). Every snapshot gets the backend's aliases and its time, then is applied to
the registry. A round that fails marks the backend down; the next answered one brings it up.
A round that only timed out while Pharos has requests in flight on the backend is not a
failure: llama-cpp-python's server answers nothing, /v1/models included, while it generates
(live, 0.3.36), so such a round holds the backend up (derive.held_up) and marks nothing down.
State owns which backends exist; this module only runs them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

import aiohttp

from pharos.clock import Clock
from pharos.engine import (
    BackendUnreachable,
    Plan,
    ScrapeResult,
    apply_aliases,
    follow_line,
    resolve,
    scrape,
)
from pharos.engine.types import Snapshot
from pharos.state.derive import held_up
from pharos.state.logfollow import FollowLineFn, LogFeedOpener, LogFollower, SleepFn
from pharos.state.records import BackendRuntime
from pharos.state.registry import TargetRegistry
from pharos.state.rounds import apply_round
from pharos.state.spec import BackendSpec, StateOptions

log = logging.getLogger("pharos.state")

ResolveFn = Callable[..., Awaitable[tuple[Plan, Snapshot]]]
ScrapeFn = Callable[..., Awaitable[ScrapeResult]]
AliasFn = Callable[[Snapshot, Mapping[str, str]], Snapshot]
BackendCheck = Callable[[BackendRuntime], bool]
BackendHook = Callable[[BackendRuntime], None]


def _plan_identity(plan: Plan) -> tuple[object, ...]:
    return (plan.kind, plan.version, tuple(probe.name for probe in plan.active))


def plan_line(url: str, previous: Plan | None, plan: Plan) -> str:
    """The info line for a first or changed plan: a background round logs changes only."""
    version = plan.version or "unknown"
    what = f"{plan.kind.value} {version}"
    if previous is not None and previous.version != plan.version:
        what += f" (was {previous.version or 'unknown'})"
    active = ",".join(probe.name for probe in plan.active) or "none"
    head = "new plan" if previous is not None else "plan"
    return (
        f"backend {url}: {what}; {head}: {len(plan.active)} probes active ({active}), "
        f"{len(plan.dropped)} dropped"
    )


def _is_down(backend: BackendRuntime) -> bool:
    return backend.reachable is False or backend.ejected is not None


def detach_tasks(backend: BackendRuntime) -> list[asyncio.Task[None]]:
    """Unhook the backend's scrape and log tasks; the caller cancels (and may await) them."""
    tasks = [task for task in (backend.scrape_task, backend.log_task) if task is not None]
    backend.scrape_task = None
    backend.log_task = None
    return tasks


def eject_backend(backend: BackendRuntime, reason: str) -> None:
    """Down until the next answered round."""
    was_down = _is_down(backend)
    backend.ejected = reason
    if not was_down:
        log.warning("backend %s down: %s", backend.spec.url, reason)


class Scraper:
    """Runs rounds for the backends State hands it.

    `follows_now(backend)` says whether State has started and the backend is still its
    current one (its log task may run); `round_done(backend)` is called after every round;
    `in_flight(backend)` says whether Pharos has requests on it now (replies still streaming
    included).
    """

    def __init__(
        self,
        clock: Clock,
        session: aiohttp.ClientSession,
        options: StateOptions,
        registry: TargetRegistry,
        *,
        follows_now: BackendCheck,
        round_done: BackendHook,
        in_flight: BackendCheck,
        on_decision: Callable[[str, str, str], None] | None,
        resolve_fn: ResolveFn | None,
        scrape_fn: ScrapeFn | None,
        follow_line_fn: FollowLineFn | None,
        apply_aliases_fn: AliasFn | None,
        open_log_feed: LogFeedOpener | None,
        rng: random.Random | None,
        sleep: SleepFn,
    ) -> None:
        self._clock = clock
        self._session = session
        self._options = options
        self._registry = registry
        self._follows_now = follows_now
        self._round_done = round_done
        self._in_flight = in_flight
        self._on_decision = on_decision
        self._resolve: ResolveFn = resolve_fn or resolve
        self._scrape: ScrapeFn = scrape_fn or scrape
        self._apply_aliases: AliasFn = apply_aliases_fn or apply_aliases
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        self._log_follower = (
            None
            if open_log_feed is None
            else LogFollower(
                clock,
                options,
                registry,
                open_log_feed,
                follow_line_fn or follow_line,
                self._prepared,
                self._decide,
                sleep,
            )
        )

    # --- tasks -----------------------------------------------------------------------------

    def start(self, backend: BackendRuntime) -> None:
        if backend.scrape_task is None:
            backend.scrape_task = asyncio.get_running_loop().create_task(
                self._loop(backend), name=f"pharos-scrape {backend.spec.url}"
            )
        self.sync_log_follower(backend)

    def next_delay_s(self) -> float:
        jitter = self._options.jitter_fraction
        return self._options.fast_interval_s * (1.0 + self._rng.uniform(-jitter, jitter))

    async def _loop(self, backend: BackendRuntime) -> None:
        while True:
            await self.run_round(backend)
            await self._sleep(self.next_delay_s())

    # --- one round -------------------------------------------------------------------------

    async def run_round(self, backend: BackendRuntime) -> None:
        now = self._clock.now()
        busy = self._in_flight(backend)
        try:
            if self._resolve_due(backend, now):
                await self._resolve_round(backend, now, busy)
            else:
                await self._scrape_round(backend, now, busy)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a bug or an engine surprise must not end the scraper
            self._round_failed(backend, f"{type(error).__name__}: {error}")
        self._round_done(backend)

    def _resolve_due(self, backend: BackendRuntime, now: float) -> bool:
        plan = backend.plan
        if plan is None or backend.needs_resolve or backend.resolved_at is None:
            return True
        since_s = now - backend.resolved_at
        if plan.incomplete and since_s >= self._options.full_interval_s:
            return True  # a probe was dropped for a passing reason (no answer, a 5xx)
        return since_s >= self._options.resolve_every_s

    async def _resolve_round(self, backend: BackendRuntime, now: float, busy: bool) -> None:
        spec = backend.spec
        try:
            plan, snapshot = await self._resolve(
                self._session,
                spec.url,
                spec.kind,
                own=spec.own_probes,
                has_log_feed=self._has_log_feed(spec),
                timeout_s=self._options.resolve_timeout_s,
            )
        except asyncio.CancelledError:
            raise
        except BackendUnreachable as error:
            if not (error.silent and self._silent_round(backend, "resolve", busy)):
                self._decide(spec.url, "resolve", "failed")
                self._round_failed(backend, f"resolve failed: {type(error).__name__}: {error}")
            return
        except Exception as error:
            self._decide(spec.url, "resolve", "failed")
            self._round_failed(backend, f"resolve failed: {type(error).__name__}: {error}")
            return
        previous = backend.plan
        same = previous is not None and _plan_identity(previous) == _plan_identity(plan)
        if not same:
            log.info("%s", plan_line(spec.url, previous, plan))
        backend.plan = plan
        backend.resolved_at = now
        backend.needs_resolve = False
        backend.round_no = 0
        self._decide(spec.url, "resolve", "same_plan" if same else "new_plan")
        self._apply(backend, snapshot, now, full=True)
        self._answered(backend)
        self.sync_log_follower(backend)

    async def _scrape_round(self, backend: BackendRuntime, now: float, busy: bool) -> None:
        spec = backend.spec
        plan = backend.plan
        assert plan is not None
        backend.round_no += 1
        full = backend.round_no % self._options.rounds_per_full == 0
        if not plan.paths(fast_only=not full):
            return  # nothing to read this round (no load probes): no request, no news
        result = await self._scrape(
            plan,
            self._session,
            spec.url,
            fast_only=not full,
            timeout_s=self._options.scrape_timeout_s,
        )
        if not result.answered:
            if result.silent and self._silent_round(backend, "scrape", busy):
                return
            self._decide(spec.url, "scrape", "unreachable")
            self._round_failed(backend, "unreachable")
            return
        self._apply(backend, result.snapshot, now, full=full)
        self._answered(backend)
        if result.failed:
            backend.needs_resolve = True
            self._decide(spec.url, "scrape", "probe_failed")
        elif result.needs_resolve:
            backend.needs_resolve = True
            self._decide(spec.url, "scrape", "new_version")
        else:
            self._decide(spec.url, "scrape", "ok")

    def _prepared(self, backend: BackendRuntime, snapshot: Snapshot, at: float) -> Snapshot:
        """Every snapshot (resolve, scrape, log line) gets the backend's aliases and its time."""
        if backend.spec.aliases:
            snapshot = self._apply_aliases(snapshot, backend.spec.aliases)
        return replace(snapshot, at=at)

    def _apply(self, backend: BackendRuntime, snapshot: Snapshot, at: float, *, full: bool) -> None:
        snapshot = self._prepared(backend, snapshot, at)
        apply_round(self._registry, backend, snapshot, at, full=full, decide=self._decide)

    def _decide(self, backend_url: str, stage: str, outcome: str) -> None:
        if self._on_decision is not None:
            self._on_decision(backend_url, stage, outcome)

    # --- up and down -----------------------------------------------------------------------

    def _silent_round(self, backend: BackendRuntime, stage: str, busy_at_start: bool) -> bool:
        """A round every path of which timed out: True when it holds the backend up (Pharos
        had requests on it when the round started or has now, or had them during a recent
        silent round), False when it fails like any other. A refused connection never
        gets here."""
        now = self._clock.now()
        if busy_at_start or self._in_flight(backend):
            backend.busy_silent_at = now
        elif not held_up(backend, self._options, now):
            return False
        self._decide(backend.spec.url, stage, "busy_timeout")
        return True

    def _answered(self, backend: BackendRuntime) -> None:
        was_down = _is_down(backend)
        backend.busy_silent_at = None
        backend.reachable = True
        backend.down_reason = None
        backend.ejected = None
        if was_down:
            log.info("backend %s up again", backend.spec.url)

    def _round_failed(self, backend: BackendRuntime, reason: str) -> None:
        was_down = _is_down(backend)
        backend.busy_silent_at = None
        backend.reachable = False
        backend.down_reason = reason
        if not was_down:
            log.warning("backend %s down: %s", backend.spec.url, reason)

    # --- the log follower ------------------------------------------------------------------

    def _has_log_feed(self, spec: BackendSpec) -> bool:
        return spec.log_feed is not None and self._log_follower is not None

    def follows_logs(self, backend: BackendRuntime) -> bool:
        """The backend's plan reads its log feed (whether or not the feed is connected now)."""
        plan = backend.plan
        return self._has_log_feed(backend.spec) and plan is not None and bool(plan.log_probes)

    def sync_log_follower(self, backend: BackendRuntime) -> None:
        wanted = not backend.draining and self.follows_logs(backend) and self._follows_now(backend)
        if wanted and backend.log_task is None:
            assert self._log_follower is not None
            backend.log_task = asyncio.get_running_loop().create_task(
                self._log_follower.run(backend), name=f"pharos-logs {backend.spec.url}"
            )
        elif not wanted and backend.log_task is not None:
            backend.log_task.cancel()
            backend.log_task = None
            backend.log_snapshot = None
            backend.log_connected = False

    async def run_log_session(self, backend: BackendRuntime) -> bool:
        """Open the backend's feed and follow it until it drops; True if it connected."""
        if self._log_follower is None:
            return False
        return await self._log_follower.session(backend)
