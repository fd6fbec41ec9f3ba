"""Fixtures for the obs tests: fake engines behind a real Pharos runtime on 127.0.0.1.

Keys come from config YAML (parse_config) holding only SHA-256 digests, as in production.
Nothing sleeps to pass time: a test that needs time to move injects a FakeClock and steps it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import yaml

from pharos.clock import Clock
from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import parse_config
from pharos.fakeengine import FakeEngine, serve
from pharos.proxy.auth import hash_key
from pharos.proxy.done import RequestDone
from pharos.state import StateOptions

MODEL = "qwen2.5:0.5b"
SECRET_PROMPT = "the-secret-prompt-text-7f3a"
"""A prompt string that must never appear in logs, labels or pages."""

# Scrape often enough that tests do not wait long for the first round; a stepped fake clock
# must not turn the scraped signals stale, so staleness allows any step.
FAST_STATE = StateOptions(fast_interval_s=0.2, full_interval_s=0.4, stale_factor=1e9)


@dataclass(frozen=True)
class KeySpec:
    name: str
    secret: str
    rpm: int | None = None
    tokens_per_day: int | None = None
    weight: int = 1
    models: tuple[str, ...] = ()
    admin: bool = False
    metrics: bool = False

    def as_config(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "sha256": hash_key(self.secret)}
        if self.rpm is not None:
            entry["rpm"] = self.rpm
        if self.tokens_per_day is not None:
            entry["tokens_per_day"] = self.tokens_per_day
        if self.weight != 1:
            entry["weight"] = self.weight
        if self.models:
            entry["models"] = list(self.models)
        if self.admin:
            entry["admin"] = True
        if self.metrics:
            entry["metrics"] = True
        return entry


@dataclass(frozen=True)
class BackendSpecYaml:
    fake: FakeEngine
    kind: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Router:
    base: str
    pharos: Pharos
    fakes: list[FakeEngine]
    urls: list[str]
    session: aiohttp.ClientSession

    def headers(self, secret: str | None) -> dict[str, str]:
        return {} if secret is None else {"Authorization": f"Bearer {secret}"}

    async def chat(
        self,
        secret: str | None,
        model: str = MODEL,
        *,
        stream: bool = False,
        content: str = "hello",
        request_id: str | None = None,
        **extra: Any,
    ) -> tuple[int, dict[str, str], bytes]:
        headers = self.headers(secret)
        if request_id is not None:
            headers["X-Request-Id"] = request_id
        body = {
            "model": model,
            "stream": stream,
            "messages": [{"role": "user", "content": content}],
            **extra,
        }
        async with self.session.post(
            f"{self.base}/v1/chat/completions", json=body, headers=headers
        ) as resp:
            return resp.status, dict(resp.headers), await resp.read()

    async def get(self, path: str, secret: str | None = None) -> tuple[int, dict[str, str], bytes]:
        async with self.session.get(f"{self.base}{path}", headers=self.headers(secret)) as resp:
            return resp.status, dict(resp.headers), await resp.read()


def config_text(
    backends: Sequence[tuple[str, str, dict[str, Any]]],
    keys: Sequence[KeySpec],
    timezone: str | None,
) -> str:
    document: dict[str, Any] = {
        "backends": [{"url": url, "kind": kind, **extra} for url, kind, extra in backends],
    }
    if keys:
        document["keys"] = [key.as_config() for key in keys]
    if timezone is not None:
        document["usage"] = {"timezone": timezone}
    return yaml.safe_dump(document, sort_keys=False)


StartRouter = Callable[..., Awaitable[Router]]


@pytest.fixture
async def start_router() -> AsyncIterator[StartRouter]:
    """start_router(backends, keys=(), clock=None, timezone=None, on_done=None) -> Router,
    served and ready; `on_done` is told of each finished request (RuntimeOptions.on_done)."""
    async with contextlib.AsyncExitStack() as stack:
        session = await stack.enter_async_context(aiohttp.ClientSession())

        async def start(
            backends: Sequence[BackendSpecYaml],
            keys: Sequence[KeySpec] = (),
            clock: Clock | None = None,
            timezone: str | None = "UTC",
            on_done: Callable[[RequestDone], None] | None = None,
        ) -> Router:
            urls = [await stack.enter_async_context(serve(b.fake)) for b in backends]
            text = config_text(
                [(url, b.kind, b.extra) for url, b in zip(urls, backends, strict=True)],
                keys,
                timezone,
            )
            pharos = Pharos(
                parse_config(text, "test"),
                clock=clock,
                options=RuntimeOptions(state=FAST_STATE, origin=7, on_done=on_done),
            )
            base = await stack.enter_async_context(running(pharos))
            assert await pharos.wait_ready(10.0), "the first scrape round never finished"
            await wait_for(lambda: targets_published(pharos, backends), "targets never appeared")
            return Router(base, pharos, [b.fake for b in backends], urls, session)

        yield start


def targets_published(pharos: Pharos, backends: Sequence[BackendSpecYaml]) -> bool:
    """Every backend has published its targets."""
    now = pharos.clock.now()
    seen = {view.backend_url for view in pharos.state.all_targets(now) if view.up}
    return len(seen) >= len(backends)


async def wait_for(condition: Callable[[], bool], what: str, *, ticks: int = 2000) -> None:
    """Yield to the loop (real sockets need real time) until `condition`; bounded, ~10 s."""
    for _ in range(ticks):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(what)
