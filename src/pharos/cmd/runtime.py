"""The composition root: one Pharos instance with every component wired, as `serve`,
`demo` and the tests run it.

Components are built once, in dependency order, each with everything it needs passed
to its constructor; nothing is assigned onto a built component afterwards. The order:

    clock, sessions -> keys, usage, prefix -> state -> sched -> flags -> obs -> proxy -> app

Two events flow against that order (State tells the scheduler a round ended, and obs a
background decision); State takes them as callbacks that forward through this root.
They fire only after `start()`, when every component exists.

Where the two components landing in this wave plug in (one constructor line each):
- discovery/docker: built after `self.sources` with `publish=lambda specs:
  self.sources.set(DOCKER, specs)`; started in `start()` after the state, stopped in
  `stop()` before it. Its docker:// log feeds go through `open_log_feed` (discovery/feeds).
- peer/: built after `self.proxy` from (state, sched, usage, prefix, clock, config.peers);
  `serve` starts its listener before the public one and, at startup, restores from the
  state file and the peers before `self.restored` is set; a leaving delta at shutdown.

Listening on a socket is the caller's job (`serve`, `running`), so tests can put the
app on 127.0.0.1 port 0 and step a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import zoneinfo
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import aiohttp
from aiohttp import web

from pharos.clock import Clock, SystemClock
from pharos.config import Config, Limits, usage_zone
from pharos.config.credentials import upstream_headers
from pharos.config.reload import restart_needed
from pharos.discovery import BackendSources, backend_specs, open_log_feed
from pharos.discovery.combine import DOCKER, STATIC
from pharos.obs.access import AccessLog
from pharos.obs.service import Observability
from pharos.peer.restore import Shared
from pharos.peer.table import PeerTable
from pharos.prefix import PrefixIndex, Source
from pharos.proxy.app import ROUTES, Flags, Proxy, ProxyOptions, api_error_for
from pharos.proxy.auth import KeyTable
from pharos.proxy.bodies import BYTES_PER_MB, BodyBudget
from pharos.proxy.credentials import CredentialsRef, CredentialTable, credentials_middleware
from pharos.proxy.done import RequestDone
from pharos.proxy.front import Front
from pharos.proxy.keys import KeyRing, key_table
from pharos.proxy.listener import LimitedRunner, ListenerLimits
from pharos.proxy.pool import UpstreamClient
from pharos.proxy.request_id import RequestIds, echo_request_ids
from pharos.sched import DEFAULT_QUEUE_LIMIT, Scheduler
from pharos.state import BackendSpec, State, StateOptions
from pharos.usage import UsageBook

log = logging.getLogger("pharos")

SCRAPE_CONNECTIONS_PER_HOST = 8
"""A round sends a few probes at once; scrapes have their own pool (see scrape_session)."""


@dataclass(frozen=True)
class RuntimeOptions:
    state: StateOptions = field(default_factory=StateOptions)
    proxy: ProxyOptions = field(default_factory=ProxyOptions)
    prefix_cap_entries: int = 200_000
    queue_limit: int = DEFAULT_QUEUE_LIMIT  # fair-queue waiters before 429 (spec §8)
    origin: int | None = None  # None: a random 64-bit origin (spec §2)
    on_done: Callable[[RequestDone], None] | None = None  # also told of each finished request
    front: bool = True  # the inference routes on proxy/front.py's server side, not aiohttp's


def upstream_session(
    credentials: CredentialsRef | None = None, *, force_close: bool = False
) -> aiohttp.ClientSession:
    """The client of the Ollama info routes' fan-out (/api/tags, /api/ps, /api/show):
    keep-alive, no compression, no timeout on bodies (§9). Inference goes through
    proxy/pool.UpstreamClient.

    No cap on connections: the scheduler's leases already bound what each target gets,
    and a pool cap below that made requests wait for a connection unseen (issue 11:
    limit_per_host=64 under 150 streams). `force_close`: every request on a new connection."""
    connector = aiohttp.TCPConnector(
        limit=0, limit_per_host=0, ttl_dns_cache=300, force_close=force_close
    )
    return aiohttp.ClientSession(
        connector=connector,
        middlewares=_credential_middlewares(credentials),
        auto_decompress=False,
        skip_auto_headers=("Accept-Encoding",),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0),
    )


new_session = upstream_session
"""The old name, kept for callers outside this package."""


def scrape_session(credentials: CredentialsRef | None = None) -> aiohttp.ClientSession:
    """The scraper's own pool, so a scrape never waits behind inference traffic: sharing
    the proxy's pool, a healthy engine under 150 streams missed its 0.8 s scrape timeout
    waiting for a connection and was marked down twice in 30 s (issue 11)."""
    connector = aiohttp.TCPConnector(
        limit=0, limit_per_host=SCRAPE_CONNECTIONS_PER_HOST, ttl_dns_cache=300
    )
    return aiohttp.ClientSession(
        connector=connector, middlewares=_credential_middlewares(credentials)
    )


def _credential_middlewares(
    credentials: CredentialsRef | None,
) -> tuple[aiohttp.ClientMiddlewareType, ...]:
    """Each backend's upstream credentials go on the requests sent to it, and only to it."""
    return () if credentials is None else (credentials_middleware(credentials),)


def credential_table(config: Config) -> CredentialTable:
    return CredentialTable(upstream_headers(config.backends, os.environ))


def listener_limits(limits: Limits) -> ListenerLimits:
    return ListenerLimits(idle_s=limits.client_idle.seconds, max_connections=limits.max_connections)


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
        credentials: CredentialsRef | None = None,
    ) -> None:
        """`session`: the proxy's upstream client (default: one of its own, closed by
        `stop`); `backends`: the static list instead of config's (zero-config, tests)."""
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.options = options if options is not None else RuntimeOptions()
        self._own_session = session is None
        self.credentials = credentials if credentials is not None else CredentialsRef()
        self.credentials.table = credential_table(config)
        self.session = session if session is not None else upstream_session(self.credentials)
        self.scrape_session = scrape_session(self.credentials)
        self.upstream = UpstreamClient(self.credentials)
        """The proxy's upstream client for inference (proxy/pool.py); `session` serves the
        Ollama info routes' fan-out."""
        self.keyring = KeyRing(key_table(config))
        self.request_ids = RequestIds()
        self.usage = UsageBook(
            self.clock,
            cast(zoneinfo.ZoneInfo, usage_zone(config.usage)),
            origin=self.options.origin,
            retention_days=config.usage.retention_days,
        )
        self.prefix = PrefixIndex(cap_entries=self.options.prefix_cap_entries, clock=self.clock)
        self.state = State(
            self.clock,
            self.scrape_session,
            self.options.state,
            on_round=self._round_done,
            on_decision=self._decided,
            open_log_feed=open_log_feed,
            inflight_of=self._inflight_of,
        )
        self.sources = BackendSources(self.state.set_backends)
        self.sources.set(STATIC, backends if backends is not None else backend_specs(config))
        self.peers = PeerTable()  # peer plane: the hot path pushes prefix ops to it
        self.sched = Scheduler(
            self.state,
            self.prefix,
            self.clock,
            policy=config.policy.value,
            queue_limit=self.options.queue_limit,
            queue_wait_s=config.limits.queue_wait.seconds,
            on_prefix_op=self.peers.push,
        )
        self.shared = Shared(self.prefix, self.state, self.usage, self.sched)  # peer plane
        self.restored = asyncio.Event()
        """Set once startup restored what it could (state file, later peers)."""
        self.flags = Flags(self.state.ready_event, self.restored)
        self.obs = Observability(
            state=self.state,
            sched=self.sched,
            usage=self.usage,
            clock=self.clock,
            policy=config.policy.value,
            keys=self.keyring,
            flags=self.flags,
            peers=self.peers.status if config.peers is not None else None,
        )
        self.proxy = Proxy(
            clock=self.clock,
            session=self.session,
            upstream=self.upstream,
            state=self.state,
            sched=self.sched,
            usage=self.usage,
            keys=self.keyring,
            flags=self.flags,
            on_done=self._request_done,
            request_ids=self.request_ids,
            options=dataclasses.replace(
                self.options.proxy,
                body_read_s=config.limits.client_body.seconds,
                upstream_idle_s=config.limits.upstream_idle.seconds,
            ),
        )
        self.body_budget = BodyBudget(config.limits.bodies_in_flight_mb * BYTES_PER_MB)
        self.access = AccessLog(
            self.request_ids, budget=self.body_budget, api_errors=api_error_for
        )  # the access line, the body budget and the API's 404/405 in one middleware
        self.app = web.Application(
            middlewares=[self.access.middleware],
            client_max_size=self.options.proxy.max_body_bytes + 1024,
        )
        echo_request_ids(self.app, self.request_ids)
        self.obs.add_routes(self.app)
        self.proxy.add_routes(self.app)

    def public_runner(self, *, shutdown_timeout_s: float) -> LimitedRunner:
        """The public listener's runner (`serve` and `running` both): the limits, aiohttp's
        handler cancellation, and the front for the inference routes."""
        front = None
        if self.options.front:
            front = Front(
                serve=self.proxy.serve,
                routes=ROUTES,
                access=self.access,
                budget=self.body_budget,
                ids=self.request_ids,
                idle_s=self.config.limits.client_idle.seconds,
            )
        return LimitedRunner(
            self.app,
            listener_limits(self.config.limits),
            front=front,
            handle_signals=False,
            handler_cancellation=True,
            shutdown_timeout=shutdown_timeout_s,
            access_log=None,
        )

    @property
    def keys(self) -> KeyTable:
        return self.keyring.table

    def _request_done(self, done: RequestDone) -> None:
        self.obs.on_done(done)
        if self.options.on_done is not None:
            self.options.on_done(done)

    def _round_done(self, _backend_url: str) -> None:
        self.sched.kick()

    def _inflight_of(self, target_id: int) -> int:
        """State reads the scheduler's leases (built after it: State is its TargetSource)."""
        return self.sched.inflight(target_id)

    def _decided(self, backend: str, stage: str, outcome: str) -> None:
        self.obs.on_decision(backend, stage, outcome)

    def set_discovered(self, specs: Sequence[BackendSpec]) -> None:
        """Docker-label backends (discovery/docker); a static backend of the same URL wins."""
        self.sources.set(DOCKER, specs)

    async def start(self, *, restored: bool = True) -> None:
        """Start scraping. `restored=False` keeps /healthz at 503 until the caller has
        restored its state and sets `self.restored` (serve does)."""
        if self.keys.is_open:
            log.warning("no keys configured: every client is let in as one anonymous key")
        await self.state.start()
        self.obs.metrics.loop_lag.start()
        if restored:
            self.restored.set()

    async def wait_ready(self, timeout_s: float) -> bool:
        """Wait (bounded) for the first scrape round; serve opens its listener after it."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.state.ready_event.wait()
        return self.state.ready

    async def stop(self) -> None:
        self.access.flush()
        await self.obs.metrics.loop_lag.stop()
        await self.state.stop()
        await self.scrape_session.close()
        await self.upstream.close()
        if self._own_session:
            await self.session.close()

    # ---- hot reload ----------------------------------------------------------------------

    def apply_config(self, new: Config) -> tuple[str, ...]:
        """Apply keys and static backends live; return the sections that need a restart.

        Everything is built before anything is swapped in, so a ConfigError leaves the
        running config whole."""
        keys = key_table(new)
        backends = backend_specs(new)
        credentials = credential_table(new)
        self.keyring.replace(keys)
        self.credentials.table = credentials
        self.sources.set(STATIC, backends)
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
    runner = pharos.public_runner(shutdown_timeout_s=shutdown_timeout_s)
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
