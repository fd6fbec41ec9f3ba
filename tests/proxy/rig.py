"""Layer-3 fixtures (spec §14): fake engines and a Pharos runtime on real 127.0.0.1 sockets.

Nothing sleeps to wait: tests wait on a condition of Pharos's or a fake's state
with bounded polling (`Rig.until`), or hold a fake's replies and release them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.typedefs import Middleware

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Config, Limits
from pharos.engine.types import Kind, Residency
from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeOllama, FakeVLLM, serve
from pharos.proxy.app import ProxyOptions
from pharos.proxy.done import RequestDone
from pharos.state import BackendSpec, StateOptions
from pharos.state.view import TargetView

FAST_STATE = StateOptions(
    fast_interval_s=0.02,
    full_interval_s=0.02,
    scrape_timeout_s=2.0,
    resolve_timeout_s=2.0,
    jitter_fraction=0.0,
    stale_factor=100.0,  # a loaded test machine may miss a few 20 ms rounds: not "down"
)
SLOW_STATE = StateOptions(
    fast_interval_s=60.0,
    full_interval_s=60.0,
    scrape_timeout_s=2.0,
    resolve_timeout_s=2.0,
    jitter_fraction=0.0,
)
"""One round at start, then none during a test: only the proxy can eject a backend."""
WAIT_S = 5.0


async def kill(fake: FakeEngine) -> None:
    """fake.kill(), plus closing the connections it leaves idle: a killed process closes
    every socket, while FakeEngine.kill() only stops the listener and aborts replies in
    flight, so a client's pooled keep-alive connection would still be served (with 500)."""
    site = fake._site
    server = site._runner.server if site is not None else None
    await fake.kill()
    if server is not None:
        for handler in list(server.connections):
            handler.force_close()


def add_middleware(fake: FakeEngine, middleware: Middleware) -> None:
    """Every app the fake builds from now on runs `middleware` in front of its routes."""
    original = fake.app

    def app() -> web.Application:
        built = original()
        built.middlewares.append(middleware)
        return built

    fake.app = app  # type: ignore[method-assign]


PostAnswer = Callable[[web.Request], Awaitable[web.StreamResponse | None]]
"""Answers one POST the fake was sent, or None to let the fake's own route answer it."""


def answer_posts(fake: FakeEngine, answer: PostAnswer) -> None:
    """Every POST the fake is sent goes to `answer` first; GETs (the scraper's) and a POST it
    answers with None reach the fake's routes."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method == "POST":
            response = await answer(request)
            if response is not None:
                return response
        return await handler(request)

    add_middleware(fake, middleware)


class Interceptor:
    """Sees every body a fake is sent and, when `refuse_with` is set, answers POSTs itself
    (an engine that refuses with a 5xx, or lacks a route)."""

    def __init__(self, fake: FakeEngine) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.refuse_with: tuple[int, bytes] | None = None
        answer_posts(fake, self._post)

    async def _post(self, request: web.Request) -> web.StreamResponse | None:
        self.bodies.append((request.path, await request.read()))
        if self.refuse_with is not None:
            status, body = self.refuse_with
            return web.Response(status=status, body=body, content_type="application/json")
        return None

    def posted(self, path: str) -> list[bytes]:
        return [body for seen, body in self.bodies if seen == path]


def kind_of(fake: FakeEngine) -> Kind:
    if isinstance(fake, FakeOllama):
        return Kind.OLLAMA
    if isinstance(fake, FakeLlamaCpp):
        return Kind.LLAMACPP
    if isinstance(fake, FakeVLLM):
        return Kind.VLLM
    raise TypeError(type(fake))


@dataclass
class Backend:
    """One fake to put behind Pharos, and its config."""

    fake: FakeEngine
    aliases: Mapping[str, str] = field(default_factory=dict)  # engine name -> client name
    capacity: int | None = None
    memory_bytes: int | None = None


@dataclass
class Rig:
    base: str
    pharos: Pharos
    fakes: list[FakeEngine]
    urls: list[str]
    client: aiohttp.ClientSession
    done: list[RequestDone]

    def now(self) -> float:
        return self.pharos.clock.now()

    def views(self, model: str) -> Sequence[TargetView]:
        return self.pharos.state.targets_for_model(model, self.now())

    def view(self, url: str, model: str) -> TargetView:
        (view,) = [v for v in self.views(model) if v.backend_url == url]
        return view

    def backend_up(self, url: str) -> bool:
        return any(b.up for b in self.pharos.state.backends() if b.url == url)

    async def until(
        self, condition: Callable[[], object], what: str, timeout_s: float = WAIT_S
    ) -> None:
        """Poll a condition of in-process state (no I/O) until it holds; fail after timeout_s."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not condition():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.005)

    async def until_loaded(self, url: str, model: str) -> None:
        await self.until(
            lambda: self.view(url, model).residency is Residency.LOADED,
            f"{model} loaded on {url} as Pharos sees it",
        )

    async def until_done(self, count: int) -> None:
        await self.until(lambda: len(self.done) >= count, f"{count} finished requests")

    def inflight(self) -> int:
        sched = self.pharos.sched
        return sum(sched.inflight(v.target_id) for v in self.pharos.state.all_targets(self.now()))

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        async with self.client.post(self.base + path, json=body, **kw) as response:
            data = await response.read()
            if response.content_type == "application/json":
                return response.status, await response.json()
            return response.status, data

    async def chat(
        self,
        model: str,
        content: str,
        *,
        path: str = "/v1/chat/completions",
        messages: list[dict[str, str]] | None = None,
        **extra: Any,
    ) -> tuple[int, Any]:
        body = {"model": model, "messages": messages or [{"role": "user", "content": content}]}
        body.update(extra)
        return await self.post(path, body)


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def rig() -> AsyncIterator[RigFactory]:
    """`await rig(Backend(fake), ..., proxy=ProxyOptions(...), queue_limit=...)` starts the
    fakes and Pharos in front of them, and waits until every backend is up."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            *backends: Backend,
            proxy: ProxyOptions | None = None,
            queue_limit: int = 1000,
            extra_specs: Sequence[BackendSpec] = (),
            wait_up: bool = True,
            state: StateOptions = FAST_STATE,
            limits: Limits | None = None,
            config: Config | None = None,
        ) -> Rig:
            urls = [await stack.enter_async_context(serve(b.fake)) for b in backends]
            specs = [
                BackendSpec(
                    url,
                    kind_of(b.fake),
                    memory_bytes=b.memory_bytes,
                    capacity=b.capacity,
                    aliases=dict(b.aliases),
                )
                for url, b in zip(urls, backends, strict=True)
            ]
            done: list[RequestDone] = []
            options = RuntimeOptions(
                state=state,
                proxy=proxy or ProxyOptions(seed=1),
                queue_limit=queue_limit,
                on_done=done.append,
            )
            if config is None:
                config = Config() if limits is None else Config(limits=limits)
            pharos = Pharos(config, backends=[*specs, *extra_specs], options=options)
            base = await stack.enter_async_context(running(pharos))
            client = await stack.enter_async_context(aiohttp.ClientSession())
            result = Rig(base, pharos, [b.fake for b in backends], urls, client, done)
            if wait_up:
                await result.until(
                    lambda: all(result.backend_up(u) for u in urls), "every backend up"
                )
            return result

        yield start
