"""State: the backends, their targets and the views the scheduler reads (§5).

State owns which backends exist (adding, draining, restoring) and the target registry; the
scraper (`scraper.py`) runs each backend's rounds and log follower. Every round swaps in a new
frozen `Observed` on the backend; views are derived from it on demand, with the staleness rule
applied, so readers never wait and never see a half-written round.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

import aiohttp

from pharos.clock import Clock
from pharos.engine.types import Residency
from pharos.state.logfollow import FollowLineFn, LogFeedOpener, SleepFn
from pharos.state.records import BackendRuntime, TargetRecord
from pharos.state.registry import TargetRegistry
from pharos.state.rounds import records_of
from pharos.state.scraper import AliasFn, ResolveFn, ScrapeFn, Scraper, detach_tasks, eject_backend
from pharos.state.spec import BackendSpec, BackendStatus, StateOptions, StatRecord
from pharos.state.status import backend_status
from pharos.state.view import TargetView
from pharos.state.views import BuiltView, ViewCache, ViewList


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
        inflight_of: Callable[[int], int] | None = None,
    ) -> None:
        """`inflight_of(target_id)`: Pharos's requests on the target now (the scheduler's
        leases); a backend with any is held up through scrape timeouts. None: never busy."""
        self._clock = clock
        self._inflight_of = inflight_of
        self._options = options
        self._on_round = on_round
        self._registry = TargetRegistry()
        self._views = ViewCache(options)
        self._model_views: dict[str, ViewList] = {}
        self._backend_views: dict[str, ViewList] = {}  # by URL: what fits_if_cold reads
        self._layout = 0  # counts set_backends calls: which runtime serves each URL
        self._scraper = Scraper(
            clock,
            session,
            options,
            self._registry,
            follows_now=self._is_current,
            round_done=self._round_done,
            in_flight=self._in_flight,
            on_decision=on_decision,
            resolve_fn=resolve_fn,
            scrape_fn=scrape_fn,
            follow_line_fn=follow_line_fn,
            apply_aliases_fn=apply_aliases_fn,
            open_log_feed=open_log_feed,
            rng=rng,
            sleep=sleep,
        )
        self._backends: dict[str, BackendRuntime] = {}
        self._removed: OrderedDict[str, BackendRuntime] = OrderedDict()
        self._waiting_first_round: set[str] | None = None  # None: set_backends not called yet
        self._ready = asyncio.Event()
        self._started = False

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._started = True
        for backend in self._backends.values():
            self._scraper.start(backend)

    async def stop(self) -> None:
        self._started = False
        tasks: list[asyncio.Task[None]] = []
        for backend in (*self._backends.values(), *self._removed.values()):
            tasks.extend(detach_tasks(backend))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def ready(self) -> bool:
        """Latched once every backend of the first set finished one round, answered or not:
        an instance whose only backend is dead still becomes ready (and answers 503s)."""
        return self._ready.is_set()

    @property
    def ready_event(self) -> asyncio.Event:
        """Set with `ready`: `serve` awaits it, /healthz reads it. Only State sets it."""
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
                for task in detach_tasks(current):
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
                self._scraper.start(backend)
        self._layout += 1
        if self._waiting_first_round is None:
            self._waiting_first_round = set(desired)
        self._check_ready()

    def _remove(self, url: str) -> None:
        backend = self._backends.pop(url)
        for task in detach_tasks(backend):
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
        self._backend_views.pop(backend.spec.url, None)
        for target_id in backend.target_ids:
            record = self._registry.get(target_id)
            if record is not None:
                self._registry.forget(record)

    def _check_ready(self) -> None:
        if not self._ready.is_set() and self._waiting_first_round == set():
            self._ready.set()

    # --- rounds (run by the scraper) -------------------------------------------------------

    def next_delay_s(self) -> float:
        return self._scraper.next_delay_s()

    async def run_round(self, backend_url: str) -> None:
        """One scrape round (or resolve) of one backend; the loop is a thin wrapper."""
        backend = self._backends.get(backend_url)
        if backend is not None:
            await self._scraper.run_round(backend)

    def _round_done(self, backend: BackendRuntime) -> None:
        url = backend.spec.url
        if self._waiting_first_round is not None and self._backends.get(url) is backend:
            self._waiting_first_round.discard(url)
            self._check_ready()
        if self._on_round is not None:
            self._on_round(url)

    def _in_flight(self, backend: BackendRuntime) -> bool:
        inflight_of = self._inflight_of
        return inflight_of is not None and any(inflight_of(t) > 0 for t in backend.target_ids)

    def _is_current(self, backend: BackendRuntime) -> bool:
        return self._started and self._backends.get(backend.spec.url) is backend

    def eject(self, backend_url: str, reason: str) -> None:
        """The proxy saw a refused connection or a reply die: down until the next answered round."""
        backend = self._backends.get(backend_url)
        if backend is not None:
            eject_backend(backend, reason)

    async def run_log_session(self, backend_url: str) -> bool:
        """Open the backend's feed and follow it until it drops; True if it connected."""
        backend = self._backends.get(backend_url)
        if backend is None:
            return False
        return await self._scraper.run_log_session(backend)

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
        return self._views.view(record, backend, self._registry.restored_for(record.key), now)

    def target(self, target_id: int, now: float) -> TargetView | None:
        record = self._registry.get(target_id)
        return None if record is None else self._view(record, now)

    def targets_for_model(self, model: str, now: float) -> Sequence[TargetView]:
        """Every target whose backend lists the model now (up, down or draining)."""
        layout = (self._layout, self._registry.count_of_model(model), self._registry.restores)
        views = self._model_views.get(model)
        if views is None or views.layout != layout:
            records = (
                self._registry.get(target_id) for target_id in self._registry.ids_of_model(model)
            )
            views = self._model_views[model] = ViewList(
                layout,
                [record for record in records if record is not None],
                self._listed_view,
            )
        return views.views(now)

    def _listed_view(
        self, record: TargetRecord, now: float
    ) -> tuple[BackendRuntime | None, BuiltView | None]:
        """The runtime at the target's URL, and the view if it holds the target and lists the
        model (ViewList watches the runtime for the writes that change either)."""
        url = record.backend_url
        backend = self._backends.get(url) or self._removed.get(url)
        if backend is None:
            return None, None
        if (
            record.target_id not in backend.target_ids
            or record.model not in backend.observed.listed
        ):
            return backend, None
        return backend, self._views.built(
            record, backend, self._registry.restored_for(record.key), now
        )

    def targets_of_backend(self, backend_url: str, now: float) -> Sequence[TargetView]:
        backend = self._backends.get(backend_url) or self._removed.get(backend_url)
        if backend is None:
            return []
        layout = (self._layout, len(backend.target_ids), self._registry.restores)
        views = self._backend_views.get(backend_url)
        if views is None or views.layout != layout:
            views = self._backend_views[backend_url] = ViewList(
                layout, records_of(self._registry, backend), self._held_view
            )
        return views.views(now)

    def _held_view(
        self, record: TargetRecord, now: float
    ) -> tuple[BackendRuntime | None, BuiltView | None]:
        """The runtime at the target's URL, and the view if it holds the target, listed or not
        (targets_of_backend's views, as `_view` derives them)."""
        url = record.backend_url
        backend = self._backends.get(url) or self._removed.get(url)
        if backend is None:
            return None, None
        if record.target_id not in backend.target_ids:
            return backend, None
        return backend, self._views.built(
            record, backend, self._registry.restored_for(record.key), now
        )

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
            backend_status(
                backend, self._options, now, follows_logs=self._scraper.follows_logs(backend)
            )
            for backend in (*self._backends.values(), *self._removed.values())
        ]
