"""Views reused until their target changes (issue 13).

Building a TargetView (derive.target_view) cost 3.4-3.75 µs, and State built one per target on
every acquire: ~215 µs at 64 targets. A view depends on its record, its backend, the target's
restored stats and `now`; records and backends count their own writes (`version`), restored
stats are frozen values compared by identity, and `now` only through three freshness tests
(full round, fast round, busy hold), each true up to a threshold and false after it. So a view
built at `built_at` holds for every `now` from then up to the first threshold it passed as
fresh; an acquire rebuilds only the views of targets that changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from pharos.engine.types import Residency
from pharos.state.derive import hold_bound_s, replied_residency, scraped_residency, target_view
from pharos.state.records import BackendRuntime, TargetRecord
from pharos.state.spec import StateOptions
from pharos.state.stats import TargetStats
from pharos.state.view import TargetView


def last_fresh_at(at: float | None, bound_s: float, now: float) -> float:
    """The last `now` at which `now - at <= bound_s` (derive.fresh's test) still holds, given
    that it holds at `now`; inf when `at` is None or the test already fails (it stays failed as
    time goes on). Exact in floating point: stepped to the last float the test accepts, since
    `at + bound_s` can round to either side."""
    if at is None or not now - at <= bound_s:
        return math.inf
    last = at + bound_s
    while last - at > bound_s:
        last = math.nextafter(last, -math.inf)
    while math.nextafter(last, math.inf) - at <= bound_s:
        last = math.nextafter(last, math.inf)
    return last


def valid_until(backend: BackendRuntime, options: StateOptions, now: float) -> float:
    """The last `now` for which a view of this backend's target built at `now` stays right."""
    observed = backend.observed
    return min(
        last_fresh_at(observed.full_at, options.stale_factor * options.full_interval_s, now),
        last_fresh_at(observed.fast_at, options.stale_factor * options.fast_interval_s, now),
        last_fresh_at(backend.busy_silent_at, hold_bound_s(options), now),
    )


class BuiltView(NamedTuple):
    """A view and what it was built from. A NamedTuple: built on every write to a target, and
    a frozen dataclass's __init__ cost 1.5 µs of that."""

    view: TargetView
    backend: BackendRuntime
    backend_version: int
    record_version: int
    restored: TargetStats | None
    built_at: float
    valid_until: float
    scraped: Residency  # derive.scraped_residency: the view's residency before our replies


class ViewCache:
    """One built view per target, reused while nothing it was built from changed. A target's
    view is the same whichever list reads it."""

    def __init__(self, options: StateOptions) -> None:
        self._options = options
        self._built: dict[int, BuiltView] = {}

    def view(
        self,
        record: TargetRecord,
        backend: BackendRuntime,
        restored: TargetStats | None,
        now: float,
    ) -> TargetView:
        return self.built(record, backend, restored, now).view

    def built(
        self,
        record: TargetRecord,
        backend: BackendRuntime,
        restored: TargetStats | None,
        now: float,
    ) -> BuiltView:
        built = self._built.get(record.target_id)
        if (
            built is not None
            and built.built_at <= now <= built.valid_until
            and built.backend is backend
            and built.backend_version == backend.version
            and built.restored is restored
        ):
            if built.record_version == record.version:
                return built
            if (
                record.generation == built.view.generation
                and record.served_model == built.view.served_model
            ):
                built = self._built[record.target_id] = _replied(built, record)
                return built
        options = self._options
        built = self._built[record.target_id] = BuiltView(
            target_view(record, backend, options, now, restored),
            backend,
            backend.version,
            record.version,
            restored,
            now,
            valid_until(backend, options, now),
            scraped_residency(record, backend, options, now),
        )
        return built


def _replied(built: BuiltView, record: TargetRecord) -> BuiltView:
    """The view after a reply's writes (stats, reply_loaded_at, last_residency) when nothing
    else of the target or its backend moved, in the same freshness window: target_view's
    answer without deriving it again. At c=32 on one target every release writes the record and
    the next acquire rebuilt its view: 73k -> ~5k instructions (callgrind)."""
    old = built.view
    stats = record.stats.over(built.restored)
    view = TargetView(
        old.target_id,
        old.key,
        old.backend_url,
        old.model,
        old.served_model,
        old.kind,
        old.up,
        old.draining,
        replied_residency(built.scraped, record.reply_loaded_at, built.backend.observed.full_at),
        old.running,
        old.waiting,
        old.capacity,
        old.kv_usage,
        old.size_bytes,
        old.vram_bytes,
        old.config_capacity,
        old.memory_bytes,
        old.generation,
        stats.prefill_s_per_token,
        stats.load_s,
        stats.service_s,
        old.last_fast_scrape_at,
    )
    return BuiltView(
        view,
        built.backend,
        built.backend_version,
        record.version,
        built.restored,
        built.built_at,
        built.valid_until,
        built.scraped,
    )


ListedView = Callable[[TargetRecord, float], tuple[BackendRuntime | None, BuiltView | None]]
"""State's: the backend runtime at the target's URL (None when State has none) and the built
view (None when that runtime doesn't hold the target or doesn't list the model now)."""


@dataclass(slots=True)
class _Entry:
    record: TargetRecord
    backend: BackendRuntime | None  # the runtime at the record's URL
    backend_version: int  # what the runtime was at when `built` was chosen
    record_version: int
    built: BuiltView | None  # None: not held or not listed there
    position: int  # where its view sits in ViewList's list, -1 when it has none


class ViewList:
    """The views of a list of targets (a model's, or a backend's), in order, checked per target
    on each read: a target whose record and backend weren't written and whose freshness window
    still holds keeps its view, so a read re-derives only the targets that changed (a release
    writes one record, a scrape round one backend). Built for a `layout` (State's set of backend
    runtimes, the number of targets in the list, the registry's restores); State builds a new
    one when that moves."""

    def __init__(
        self, layout: tuple[int, int, int], records: Iterable[TargetRecord], listed: ListedView
    ) -> None:
        self.layout = layout
        self._listed = listed
        self._entries = [_Entry(record, None, -1, -1, None, -1) for record in records]
        self._views: list[TargetView] = []
        self._placed = False  # positions and the list match the entries

    def views(self, now: float) -> list[TargetView]:
        """A new list each read (0.2 µs at 64): the caller may keep or change it."""
        views = self._views
        placed = self._placed
        for entry in self._entries:
            record = entry.record
            backend = entry.backend
            built = entry.built
            if (
                record.version == entry.record_version
                and (backend is None or backend.version == entry.backend_version)
                and (built is None or built.built_at <= now <= built.valid_until)
            ):
                continue
            backend, rebuilt = self._listed(record, now)
            entry.backend = backend
            entry.backend_version = -1 if backend is None else backend.version
            entry.record_version = record.version
            entry.built = rebuilt
            if rebuilt is not None and built is not None and placed:
                views[entry.position] = rebuilt.view
            elif rebuilt is not None or built is not None:
                placed = False  # a view came or went: place them all again
        if not placed:
            views = self._views = []
            for entry in self._entries:
                if entry.built is None:
                    entry.position = -1
                else:
                    entry.position = len(views)
                    views.append(entry.built.view)
            self._placed = True
        return list(views)
