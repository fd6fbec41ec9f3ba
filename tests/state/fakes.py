"""Scripted stand-ins for pharos.engine's resolve/scrape/follow_line: State tests need no HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pharos.clock import FakeClock
from pharos.engine import BackendUnreachable
from pharos.engine.types import Feed, Kind, Load, ModelInfo, Probe, Residency, Signal, Snapshot
from pharos.state import BackendSpec, State, StateOptions

URL = "http://gpu-a:8000"
URL_B = "http://gpu-b:11434"


def _no_parse(_body: bytes) -> Snapshot:
    return Snapshot()


LOG_PROBE = Probe("log-parallel", Signal.CAPACITY, Feed(log=True), _no_parse)


@dataclass(frozen=True)
class FakePlan:
    kind: Kind
    version: str | None
    active: tuple[Probe, ...] = ()
    dropped: Mapping[str, str] = field(default_factory=dict)

    incomplete: bool = False
    fast_paths: tuple[str, ...] = ("/metrics",)

    @property
    def log_probes(self) -> tuple[Probe, ...]:
        return tuple(probe for probe in self.active if probe.feed.log)

    def paths(self, *, fast_only: bool) -> tuple[str, ...]:
        return self.fast_paths if fast_only else ("/v1/models", *self.fast_paths)


@dataclass(frozen=True)
class FakeResult:
    snapshot: Snapshot
    failed: Mapping[str, str]
    answered: bool
    plan_version: str | None
    silent: bool = False

    @property
    def needs_resolve(self) -> bool:
        return bool(self.failed) or self.snapshot.version != self.plan_version


def snap(
    version: str | None = "1.0",
    models: Mapping[str, Residency] | None = None,
    loads: Mapping[str, Load] | None = None,
) -> Snapshot:
    return Snapshot(
        version=version,
        models=None
        if models is None
        else MappingProxyType({name: ModelInfo(state=state) for name, state in models.items()}),
        loads=MappingProxyType(dict(loads or {})),
    )


NO_SESSION: Any = None
"""State's scrape session: the fake resolve and scrape functions never touch it."""


def engine_fns(engine: FakeEngine) -> dict[str, Any]:
    """The fake's resolve and scrape as State's resolve_fn and scrape_fn (they return
    FakePlan and FakeResult, which State only hands back to the same fake)."""
    return {"resolve_fn": engine.resolve, "scrape_fn": engine.scrape}


class FakeEngine:
    """One fake backend per URL: what the next resolve / scrape will read."""

    def __init__(self) -> None:
        self.snapshots: dict[str, Snapshot] = {}
        self.down: set[str] = set()  # refuses connections
        self.silent: set[str] = set()  # accepts them and answers nothing (every fetch times out)
        self.failed: dict[str, dict[str, str]] = {}
        self.log_probes: dict[str, tuple[Probe, ...]] = {}
        self.incomplete: set[str] = set()
        self.no_fast_paths: set[str] = set()
        self.calls: list[tuple[str, str]] = []  # (url, "resolve" | "full" | "fast")
        self.during_scrape: Any = None  # called while a scrape is in flight

    async def resolve(
        self,
        _session: Any,
        url: str,
        kind: Kind,
        *,
        has_log_feed: bool = False,
        **_unused: Any,  # own probes and the timeout: the fake answers at once
    ) -> tuple[FakePlan, Snapshot]:
        self.calls.append((url, "resolve"))
        if url in self.down:
            raise ConnectionError("no answer")
        if url in self.silent:
            raise BackendUnreachable(f"{url}: no path answered (timeout after 3s)", silent=True)
        current = self.snapshots[url]
        probes = self.log_probes.get(url, ()) if has_log_feed else ()
        plan = FakePlan(
            kind=Kind.VLLM if kind is Kind.AUTO else kind,
            version=current.version,
            active=probes,
            incomplete=url in self.incomplete,
            fast_paths=() if url in self.no_fast_paths else ("/metrics",),
        )
        return plan, current

    async def scrape(
        self,
        plan: FakePlan,
        _session: Any,
        url: str,
        *,
        fast_only: bool = False,
        **_unused: Any,  # the timeout: the fake answers at once
    ) -> FakeResult:
        self.calls.append((url, "fast" if fast_only else "full"))
        if self.during_scrape is not None:
            self.during_scrape()
        if url in self.down:
            return FakeResult(Snapshot(), {}, answered=False, plan_version=plan.version)
        if url in self.silent:
            return FakeResult(
                Snapshot(), {}, answered=False, plan_version=plan.version, silent=True
            )
        current = self.snapshots[url]
        if fast_only:
            fast_loads = {
                key: Load(running=load.running, waiting=load.waiting, kv_usage=load.kv_usage)
                for key, load in current.loads.items()
            }
            current = Snapshot(version=plan.version, loads=MappingProxyType(fast_loads))
        return FakeResult(
            current, self.failed.get(url, {}), answered=True, plan_version=plan.version
        )


def fake_follow_line(_plan: Any, line: bytes) -> Snapshot | None:
    """`parallel=N` -> whole-backend capacity; `unloaded M` -> M cold; `running=N`."""
    text = line.decode()
    if text.startswith("parallel="):
        return Snapshot(loads=MappingProxyType({"": Load(capacity=int(text.split("=")[1]))}))
    if text.startswith("running="):
        return Snapshot(loads=MappingProxyType({"": Load(running=int(text.split("=")[1]))}))
    if text.startswith("unloaded "):
        return Snapshot(models=MappingProxyType({text.split()[1]: ModelInfo(Residency.COLD)}))
    if text == "bad":
        raise ValueError("a matching line with an unusable value")
    return None


def fake_aliases(snapshot: Snapshot, aliases: Mapping[str, str]) -> Snapshot:
    models = snapshot.models
    if models is not None:
        models = MappingProxyType({aliases.get(k, k): v for k, v in models.items()})
    loads = MappingProxyType({aliases.get(k, k): v for k, v in snapshot.loads.items()})
    return Snapshot(
        version=snapshot.version,
        models=models,
        loads=loads,
        sources=snapshot.sources,
        at=snapshot.at,
    )


class LineFeed:
    """A log feed a test writes lines into, then ends (the stream dropped)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        line = await self.queue.get()
        if line is None:
            raise StopAsyncIteration
        return line

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Harness:
    state: State
    clock: FakeClock
    engine: FakeEngine
    decisions: list[tuple[str, str, str]]
    rounds: list[str]
    inflight: dict[int, int]  # target id -> Pharos's requests on it (what State is told)


def make_state(
    options: StateOptions | None = None,
    *,
    open_log_feed: Any = None,
    sleep: Any = None,
) -> Harness:
    clock = FakeClock()
    engine = FakeEngine()
    decisions: list[tuple[str, str, str]] = []
    rounds: list[str] = []
    inflight: dict[int, int] = {}
    extra: dict[str, Any] = {}
    if sleep is not None:
        extra["sleep"] = sleep
    state = State(
        clock,
        NO_SESSION,
        options or StateOptions(),
        on_round=rounds.append,
        on_decision=lambda url, stage, outcome: decisions.append((url, stage, outcome)),
        **engine_fns(engine),
        follow_line_fn=fake_follow_line,
        apply_aliases_fn=fake_aliases,
        open_log_feed=open_log_feed,
        inflight_of=lambda target_id: inflight.get(target_id, 0),
        **extra,
    )
    return Harness(state, clock, engine, decisions, rounds, inflight)


def spec(url: str = URL, **kwargs: Any) -> BackendSpec:
    return BackendSpec(url=url, **kwargs)
