"""State: backends, their scrapers and log followers, and the targets the scheduler reads (§5).

One scraper task per backend resolves its plan, then scrapes on a jittered timer. Every round
swaps in a new frozen `Observed` on the backend; views are derived from it on demand, with
the staleness rule applied, so readers never wait and never see a half-written round.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import aiohttp

from pharos.clock import Clock
from pharos.engine import Plan, ScrapeResult, apply_aliases, follow_line, resolve, scrape
from pharos.engine.types import Residency, Snapshot
from pharos.state.derive import target_view
from pharos.state.logfollow import FollowLineFn, LogFeedOpener, LogFollower, SleepFn
from pharos.state.records import BackendRuntime, TargetRecord
from pharos.state.registry import TargetRegistry
from pharos.state.rounds import apply_round, records_of
from pharos.state.spec import BackendSpec, BackendStatus, StateOptions, StatRecord
from pharos.state.status import backend_status
from pharos.state.view import TargetView

log = logging.getLogger("pharos.state")

ResolveFn = Callable[..., Awaitable[tuple[Plan, Snapshot]]]
ScrapeFn = Callable[..., Awaitable[ScrapeResult]]
AliasFn = Callable[[Snapshot, Mapping[str, str]], Snapshot]


def _plan_identity(plan: Plan) -> tuple[object, ...]:
    return (plan.kind, plan.version, tuple(probe.name for probe in plan.active))


class State:
    """Implements pharos.sched.TargetSource."""

    def __init__(
        self,
        clock: Clock,
        session: aiohttp.ClientSession,
        options: StateOptions = StateOptions(),  # noqa: B008 - frozen
        on_round: Callable[[str], None] | None = None,
        on_decision: Callable[[str, str, str], None] | None = None,
        *,
        resolve_fn: ResolveFn | None = None,
        scrape_fn: ScrapeFn | None = None,
        follow_line_fn: FollowLineFn | None = None,
        apply_aliases_fn: AliasFn | None = None,
        open_log_feed: LogFeedOpener | None = None,
        rng: random.Random | None = None,
        sleep: SleepFn = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._session = session
        self._options = options
        self._on_round = on_round
        self._on_decision = on_decision
        self._resolve: ResolveFn = resolve_fn or resolve
        self._scrape: ScrapeFn = scrape_fn or scrape
        self._apply_aliases: AliasFn = apply_aliases_fn or apply_aliases
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        self._registry = TargetRegistry()
        self._log_follower = (
            None
            if open_log_feed is None
            else LogFollower(
                clock,
                options,
                self._registry,
                open_log_feed,
                follow_line_fn or follow_line,
                self._prepared,
                self._decide,
                sleep,
            )
        )
        self._backends: dict[str, BackendRuntime] = {}
        self._removed: OrderedDict[str, BackendRuntime] = OrderedDict()
        self._waiting_first_round: set[str] | None = None  # None: set_backends not called yet
        self._ready = False
        self._started = False

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._started = True
        for backend in self._backends.values():
            self._start_scraper(backend)

    async def stop(self) -> None:
        self._started = False
        tasks: list[asyncio.Task[None]] = []
        for backend in (*self._backends.values(), *self._removed.values()):
            tasks.extend(self._detach_tasks(backend))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def ready(self) -> bool:
        """Latched once every backend of the first set finished one round, answered or not:
        an instance whose only backend is dead still becomes ready (and answers 503s)."""
        return self._ready

    def set_backends(self, specs: Sequence[BackendSpec]) -> None:
        desired: dict[str, BackendSpec] = {}
        for spec in specs:
            desired[spec.url] = spec
        for url in [url for url in self._backends if url not in desired]:
            self._remove(url)
        for url, spec in desired.items():
            current = self._backends.get(url)
            if current is not None:
                if current.spec == spec:
                    continue
                for task in self._detach_tasks(current):
                    task.cancel()
            backend = self._removed.pop(url, None)
            if backend is not None and backend.spec == spec:
                backend.draining = False
            else:
                if backend is not None:
                    self._forget(backend)
                backend = BackendRuntime(spec=spec)
            self._backends[url] = backend
            if self._started:
                self._start_scraper(backend)
        if self._waiting_first_round is None:
            self._waiting_first_round = set(desired)
        self._check_ready()

    def _remove(self, url: str) -> None:
        backend = self._backends.pop(url)
        for task in self._detach_tasks(backend):
            task.cancel()
        backend.draining = True
        backend.log_snapshot = None
        backend.log_connected = False
        self._removed[url] = backend
        self._removed.move_to_end(url)
        while len(self._removed) > self._options.remembered_removed:
            _, evicted = self._removed.popitem(last=False)
            self._forget(evicted)
        if self._waiting_first_round is not None:
            self._waiting_first_round.discard(url)

    def _forget(self, backend: BackendRuntime) -> None:
        for target_id in backend.target_ids:
            record = self._registry.get(target_id)
            if record is not None:
                self._registry.forget(record)

    def _detach_tasks(self, backend: BackendRuntime) -> list[asyncio.Task[None]]:
        tasks = [task for task in (backend.scrape_task, backend.log_task) if task is not None]
        backend.scrape_task = None
        backend.log_task = None
        return tasks

    def _start_scraper(self, backend: BackendRuntime) -> None:
        if backend.scrape_task is None:
            backend.scrape_task = asyncio.get_running_loop().create_task(
                self._scrape_loop(backend), name=f"pharos-scrape {backend.spec.url}"
            )
        self._sync_log_follower(backend)

    def _check_ready(self) -> None:
        if not self._ready and self._waiting_first_round == set():
            self._ready = True

    # --- the scraper -----------------------------------------------------------------------

    def next_delay_s(self) -> float:
        jitter = self._options.jitter_fraction
        return self._options.fast_interval_s * (1.0 + self._rng.uniform(-jitter, jitter))

    async def _scrape_loop(self, backend: BackendRuntime) -> None:
        while True:
            await self._run_round(backend)
            await self._sleep(self.next_delay_s())

    async def run_round(self, backend_url: str) -> None:
        """One scrape round (or resolve) of one backend; the loop is a thin wrapper."""
        backend = self._backends.get(backend_url)
        if backend is not None:
            await self._run_round(backend)

    async def _run_round(self, backend: BackendRuntime) -> None:
        url = backend.spec.url
        now = self._clock.now()
        try:
            if self._resolve_due(backend, now):
                await self._resolve_round(backend, now)
            else:
                await self._scrape_round(backend, now)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a bug or an engine surprise must not end the scraper
            self._round_failed(backend, f"{type(error).__name__}: {error}")
        if self._waiting_first_round is not None and self._backends.get(url) is backend:
            self._waiting_first_round.discard(url)
            self._check_ready()
        if self._on_round is not None:
            self._on_round(url)

    def _resolve_due(self, backend: BackendRuntime, now: float) -> bool:
        plan = backend.plan
        if plan is None or backend.needs_resolve or backend.resolved_at is None:
            return True
        since_s = now - backend.resolved_at
        if plan.incomplete and since_s >= self._options.full_interval_s:
            return True  # a probe was dropped for a passing reason (no answer, a 5xx)
        return since_s >= self._options.resolve_every_s

    def _has_log_feed(self, spec: BackendSpec) -> bool:
        return spec.log_feed is not None and self._log_follower is not None

    async def _resolve_round(self, backend: BackendRuntime, now: float) -> None:
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
        except Exception as error:
            self._decide(spec.url, "resolve", "failed")
            self._round_failed(backend, f"resolve failed: {type(error).__name__}: {error}")
            return
        same = backend.plan is not None and _plan_identity(backend.plan) == _plan_identity(plan)
        backend.plan = plan
        backend.resolved_at = now
        backend.needs_resolve = False
        backend.round_no = 0
        self._decide(spec.url, "resolve", "same_plan" if same else "new_plan")
        self._apply(backend, snapshot, now, full=True)
        self._answered(backend)
        self._sync_log_follower(backend)

    async def _scrape_round(self, backend: BackendRuntime, now: float) -> None:
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

    # --- up, down and ejection ---------------------------------------------------------------

    def _answered(self, backend: BackendRuntime) -> None:
        was_down = backend.reachable is False or backend.ejected is not None
        backend.reachable = True
        backend.down_reason = None
        backend.ejected = None
        if was_down:
            log.info("backend %s up again", backend.spec.url)

    def _round_failed(self, backend: BackendRuntime, reason: str) -> None:
        was_down = backend.reachable is False or backend.ejected is not None
        backend.reachable = False
        backend.down_reason = reason
        if not was_down:
            log.warning("backend %s down: %s", backend.spec.url, reason)

    def eject(self, backend_url: str, reason: str) -> None:
        """The proxy saw a refused connection or a reply die: down until the next answered round."""
        backend = self._backends.get(backend_url)
        if backend is None:
            return
        was_down = backend.reachable is False or backend.ejected is not None
        backend.ejected = reason
        if not was_down:
            log.warning("backend %s down: %s", backend_url, reason)

    # --- the log follower --------------------------------------------------------------------

    def _sync_log_follower(self, backend: BackendRuntime) -> None:
        plan = backend.plan
        wanted = (
            self._started
            and not backend.draining
            and self._has_log_feed(backend.spec)
            and plan is not None
            and bool(plan.log_probes)
            and self._backends.get(backend.spec.url) is backend
        )
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

    async def run_log_session(self, backend_url: str) -> bool:
        """Open the backend's feed and follow it until it drops; True if it connected."""
        backend = self._backends.get(backend_url)
        if backend is None or self._log_follower is None:
            return False
        return await self._log_follower.session(backend)

    # --- TargetSource ------------------------------------------------------------------------

    def _backend_of(self, record: TargetRecord) -> BackendRuntime | None:
        backend = self._backends.get(record.backend_url) or self._removed.get(record.backend_url)
        if backend is None or record.target_id not in backend.target_ids:
            return None
        return backend

    def _view(self, record: TargetRecord, now: float) -> TargetView | None:
        backend = self._backend_of(record)
        if backend is None:
            return None
        return target_view(
            record, backend, self._options, now, self._registry.restored_for(record.key)
        )

    def target(self, target_id: int, now: float) -> TargetView | None:
        record = self._registry.get(target_id)
        return None if record is None else self._view(record, now)

    def targets_for_model(self, model: str, now: float) -> Sequence[TargetView]:
        """Every target whose backend lists the model now (up, down or draining)."""
        views: list[TargetView] = []
        for target_id in self._registry.ids_of_model(model):
            record = self._registry.get(target_id)
            if record is None:
                continue
            backend = self._backend_of(record)
            if backend is None or model not in backend.observed.listed:
                continue
            views.append(
                target_view(
                    record, backend, self._options, now, self._registry.restored_for(record.key)
                )
            )
        return views

    def targets_of_backend(self, backend_url: str, now: float) -> Sequence[TargetView]:
        backend = self._backends.get(backend_url) or self._removed.get(backend_url)
        if backend is None:
            return []
        views = (self._view(record, now) for record in records_of(self._registry, backend))
        return [view for view in views if view is not None]

    def all_targets(self, now: float) -> Sequence[TargetView]:
        views = (self._view(record, now) for record in self._registry)
        return [view for view in views if view is not None]

    def model_listed(self, model: str) -> bool:
        """Any backend ever listed it: a request for it gets 503 when it has no target, not 404."""
        return self._registry.ever_listed(model)

    def observe(
        self,
        target_id: int,
        *,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
    ) -> None:
        record = self._registry.get(target_id)
        if record is not None:
            self._registry.observe(
                record,
                prefill_s_per_token=prefill_s_per_token,
                load_s=load_s,
                service_s=service_s,
            )

    def reply_succeeded(self, target_id: int, now: float) -> None:
        """The model is loaded: views say so until a full round that started later."""
        record = self._registry.get(target_id)
        if record is not None:
            record.reply_loaded_at = now
            record.last_residency = Residency.LOADED

    def target_id_of(self, key: str) -> int | None:
        return self._registry.id_of(key)

    def key_of(self, target_id: int) -> str | None:
        record = self._registry.get(target_id)
        return None if record is None else record.key

    def generation_of(self, target_id: int) -> int | None:
        record = self._registry.get(target_id)
        return None if record is None else record.generation

    def restore_stats(self, records: Iterable[StatRecord]) -> None:
        self._registry.restore(records)

    def export_stats(self) -> list[StatRecord]:
        return self._registry.export()

    # --- status --------------------------------------------------------------------------

    def backends(self) -> Sequence[BackendStatus]:
        now = self._clock.now()
        return [
            backend_status(backend, self._options, now, follows_logs=self._follows_logs(backend))
            for backend in (*self._backends.values(), *self._removed.values())
        ]

    def _follows_logs(self, backend: BackendRuntime) -> bool:
        plan = backend.plan
        return self._has_log_feed(backend.spec) and plan is not None and bool(plan.log_probes)

    def _decide(self, backend_url: str, stage: str, outcome: str) -> None:
        if self._on_decision is not None:
            self._on_decision(backend_url, stage, outcome)
