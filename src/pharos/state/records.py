"""What State owns per backend and per target. Readers see frozen values swapped by assignment."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pharos.engine import Plan
from pharos.engine.types import Residency, Snapshot
from pharos.state.spec import BackendSpec
from pharos.state.stats import TargetStats


@dataclass(frozen=True, slots=True)
class Observed:
    """A backend's scraped state after its last answered rounds (aliases already applied).

    `full` is the last full round (or resolve), `fast` the last round of any kind; each
    `_at` is the monotonic time the round started. `listed` is the last known model list.
    """

    full: Snapshot | None = None
    full_at: float | None = None
    fast: Snapshot | None = None
    fast_at: float | None = None
    listed: frozenset[str] = frozenset()
    version: str | None = None


@dataclass(slots=True)
class TargetRecord:
    """A backend × model. Registered on first sight, never removed: the ID stays stable."""

    target_id: int
    key: str
    backend_url: str
    model: str  # the client's name
    served_model: str  # the engine's name
    generation: int = 0
    stats: TargetStats = field(default_factory=TargetStats)
    reply_loaded_at: float | None = None  # last successful reply (monotonic)
    last_residency: Residency | None = None  # last known residency: drives unload bumps
    version: int = 0  # counts every other write: State reuses the target's view until it moves

    def __setattr__(self, name: str, value: object) -> None:
        _count_write(self, name, value)


@dataclass(slots=True)
class BackendRuntime:
    """One backend's scraper state. Only the scraper and the log follower write it."""

    spec: BackendSpec
    plan: Plan | None = None
    observed: Observed = field(default_factory=Observed)
    log_snapshot: Snapshot | None = None  # None = no feed connected (values unknown)
    log_connected: bool = False
    ejected: str | None = None
    reachable: bool | None = None
    down_reason: str | None = None
    round_no: int = 0
    resolved_at: float | None = None
    needs_resolve: bool = False
    draining: bool = False
    busy_silent_at: float | None = None  # last round that timed out with our requests in flight
    target_ids: list[int] = field(default_factory=list)
    scrape_task: asyncio.Task[None] | None = None
    log_task: asyncio.Task[None] | None = None
    version: int = 0  # counts every other write: State reuses its targets' views until it moves

    def __setattr__(self, name: str, value: object) -> None:
        _count_write(self, name, value)


def _count_write(obj: TargetRecord | BackendRuntime, name: str, value: object) -> None:
    """Every assignment bumps `version`, whoever writes (the scraper, rounds, the log follower,
    the registry, State): a writer that forgot to say so would leave a view stale."""
    object.__setattr__(obj, name, value)
    if name != "version":  # in __init__ `version` is unset until its own (last) field: 0
        object.__setattr__(obj, "version", getattr(obj, "version", 0) + 1)
