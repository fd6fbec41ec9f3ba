"""One Pharos instance with every component wired, as `serve`, `demo` and the tests run it.

Everything a component needs is passed in here; nothing else reaches for
globals. Listening on a socket is the caller's job (`serve`), so tests can put
the app on 127.0.0.1 port 0 and step a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zoneinfo
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import aiohttp
from aiohttp import web

from pharos.clock import Clock, SystemClock
from pharos.cmd.wiring import backend_specs, key_entries
from pharos.config import Config, usage_zone
from pharos.config.reload import restart_needed
from pharos.discovery import merge_specs, open_log_feed
from pharos.obs.service import Observability
from pharos.peer.statefile import StateSnapshot, TargetStatsRecord
from pharos.prefix import PrefixEntry, PrefixIndex, Source
from pharos.proxy.app import Flags, Proxy, ProxyOptions, json_errors
from pharos.proxy.auth import KeyTable
from pharos.proxy.done import RequestDone
from pharos.sched import DEFAULT_QUEUE_LIMIT, Scheduler
from pharos.state import BackendSpec, State, StateOptions, StatRecord
from pharos.usage import UsageBook

log = logging.getLogger("pharos")

RESTORE_SLICE_ENTRIES = 2000


@dataclass(frozen=True)
class RuntimeOptions:
    state: StateOptions = field(default_factory=StateOptions)
    proxy: ProxyOptions = field(default_factory=ProxyOptions)
    prefix_cap_entries: int = 200_000
    queue_limit: int = DEFAULT_QUEUE_LIMIT  # fair-queue waiters before 429 (spec §8)
    origin: int | None = None  # None: a random 64-bit origin (spec §2)
    on_done: Callable[[RequestDone], None] | None = None  # also told of each finished request


def new_session() -> aiohttp.ClientSession:
    """The shared upstream client: keep-alive, no compression, no timeout on bodies (§9)."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=64, ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        skip_auto_headers=("Accept-Encoding",),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0),
    )


def key_table(config: Config) -> KeyTable:
    return KeyTable.from_entries(key_entries(config)) if config.keys else KeyTable.open()


class Pharos:
    """A router instance: state, prefix index, scheduler, usage, proxy and observability."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock | None = None,
        session: aiohttp.ClientSession | None = None,
        backends: Sequence[BackendSpec] | None = None,
        options: RuntimeOptions | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.options = options if options is not None else RuntimeOptions()
        self._own_session = session is None
        self.session = session if session is not None else new_session()
        self._backends = list(backends) if backends is not None else backend_specs(config)
        self._discovered: list[BackendSpec] = []  # Docker labels; combined with the static list
        self.keys = key_table(config)
        zone = usage_zone(config.usage)
        self.usage = UsageBook(
            self.clock,
            cast(zoneinfo.ZoneInfo, zone),
            origin=self.options.origin,
            retention_days=config.usage.retention_days,
        )
        self.prefix = PrefixIndex(cap_entries=self.options.prefix_cap_entries, clock=self.clock)
        self.obs: Observability | None = None
        self.state = State(
            self.clock,
            self.session,
            self.options.state,
            on_round=self._on_round,
            on_decision=self._on_decision,
            open_log_feed=open_log_feed,
        )
        self.sched = Scheduler(
            self.state,
            self.prefix,
            self.clock,
            policy=config.policy.value,
            queue_limit=self.options.queue_limit,
        )
        self.flags = Flags(ready=lambda: self.state.ready)
        self.proxy = Proxy(
            clock=self.clock,
            session=self.session,
            state=self.state,
            sched=self.sched,
            usage=self.usage,
            keys=lambda: self.keys,
            options=self.options.proxy,
            flags=self.flags,
        )
        self.obs = Observability(
            state=self.state,
            sched=self.sched,
            usage=self.usage,
            clock=self.clock,
            policy=config.policy.value,
            proxy_ref=lambda: self.proxy,
        )
        self.proxy.on_done = self._on_done
        self.app = web.Application(
            middlewares=[json_errors], client_max_size=self.options.proxy.max_body_bytes + 1024
        )
        self.obs.add_routes(self.app)
        self.proxy.add_routes(self.app)

    def _on_done(self, done: RequestDone) -> None:
        if self.obs is not None:
            self.obs.on_done(done)
        if self.options.on_done is not None:
            self.options.on_done(done)

    def _on_round(self, backend_url: str) -> None:
        self.sched.kick()

    def _on_decision(self, backend: str, stage: str, outcome: str) -> None:
        if self.obs is not None:
            self.obs.on_decision(backend, stage, outcome)

    def set_discovered(self, specs: Sequence[BackendSpec]) -> None:
        """Docker-label backends (discovery.docker); a static backend of the same URL wins."""
        self._discovered = list(specs)
        self.state.set_backends(merge_specs(self._backends, self._discovered))

    async def start(self) -> None:
        if self.keys.is_open:
            log.warning("no keys configured: every client is let in as one anonymous key")
        self.state.set_backends(merge_specs(self._backends, self._discovered))
        await self.state.start()

    async def wait_ready(self, timeout_s: float) -> bool:
        """Wait (bounded) for the first scrape round; serve opens its listener after it."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while not self.state.ready:
                    await asyncio.sleep(0.05)
        return self.state.ready

    async def stop(self) -> None:
        await self.state.stop()
        if self._own_session:
            await self.session.close()

    # ---- snapshots: the state file (and later peers) restore through the same merges ----

    async def snapshot(self) -> StateSnapshot:
        """A snapshot built in slices: a full prefix index takes ~1 s to export in one go."""
        prefix: list[PrefixEntry] = []
        for batch in self.prefix.export_batches(self.state.key_of, self.state.generation_of):
            prefix.extend(batch)
            await asyncio.sleep(0)
        return StateSnapshot(
            prefix=prefix,
            cells=self.usage.export_snapshot(),
            stats=[
                TargetStatsRecord(r.key, r.prefill_s_per_token, r.load_s, r.service_s)
                for r in self.state.export_stats()
            ],
        )

    async def restore(self, snapshot: StateSnapshot) -> None:
        """Merge a snapshot (state file or peer) in slices, oldest prefix entries first."""
        await self.usage.merge_in_slices(snapshot.cells)
        entries = snapshot.prefix
        for end in range(len(entries), 0, -RESTORE_SLICE_ENTRIES):
            start = max(0, end - RESTORE_SLICE_ENTRIES)
            self.prefix.restore(
                entries[start:end], self.state.target_id_of, self.state.generation_of
            )
            await asyncio.sleep(0)
        self.state.restore_stats(
            [
                StatRecord(r.target_key, r.prefill_s_per_token, r.load_s, r.service_s)
                for r in snapshot.stats
            ]
        )

    # ---- hot reload ----------------------------------------------------------------------

    def apply_config(self, new: Config) -> tuple[str, ...]:
        """Apply keys and static backends live; return the sections that need a restart.

        Everything is built before anything is swapped in, so a ConfigError leaves the
        running config whole."""
        keys = key_table(new)
        backends = backend_specs(new)
        self.keys = keys
        self._backends = backends
        self.state.set_backends(merge_specs(self._backends, self._discovered))
        pending = restart_needed(self.config, new)
        self.config = new
        return pending


@contextlib.asynccontextmanager
async def running(
    pharos: Pharos,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    shutdown_timeout_s: float = 1.0,
) -> AsyncIterator[str]:
    """Serve `pharos.app` on host:port (0 = free) and yield its base URL; for tests and demo."""
    runner = web.AppRunner(
        pharos.app,
        handle_signals=False,
        handler_cancellation=True,
        shutdown_timeout=shutdown_timeout_s,
        access_log=None,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        await pharos.start()
        bound = runner.addresses[0][1]
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()
        await pharos.stop()


__all__ = ["Pharos", "RuntimeOptions", "Source", "new_session", "running"]
