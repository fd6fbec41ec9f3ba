"""TestFakeResolvesLikeItsCapture: pharos.engine.resolve reads each fake as it reads the
capture-replay server of the same state (spec §14 layer 3).

Each replay state is assembled from files that exist (a body present in one state only
is the same in every state, MANIFEST.md); a path with no body anywhere answers 404.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from tools.captures import shared_captures as captures_root

from pharos.engine.resolve import resolve
from pharos.engine.types import Kind, Snapshot
from pharos.fakeengine import (
    FakeEngine,
    FakeLlamaCpp,
    FakeModel,
    FakeOllama,
    FakeVLLM,
    no_sleep,
    serve,
)

ENGINES = captures_root() / "engines"
pytestmark = pytest.mark.skipif(not ENGINES.is_dir(), reason="no captures")


@contextlib.asynccontextmanager
async def replay(bodies: Mapping[str, Path | None]) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        source = bodies.get(request.path)
        if source is None:
            return web.Response(status=404)
        return web.Response(body=source.read_bytes(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def _comparable(snapshot: Snapshot) -> tuple[object, ...]:
    """KV usage is compared as known/unknown: the fake's number is its own cache model's."""
    loads = {
        key: (load.running, load.waiting, load.capacity, load.kv_usage is None)
        for key, load in snapshot.loads.items()
    }
    return (snapshot.version, snapshot.models, loads, dict(snapshot.sources))


async def _both(fake: FakeEngine, bodies: Mapping[str, Path | None], kind: Kind) -> None:
    async with aiohttp.ClientSession() as session:
        async with replay(bodies) as url:
            want_plan, want = await resolve(session, url, kind)
        async with serve(fake) as url:
            pending = await prepare(fake, session, url)
            got_plan, got = await resolve(session, url, kind)
            fake.release()
            for response in await asyncio.gather(*pending):
                response.release()
    assert [p.name for p in got_plan.active] == [p.name for p in want_plan.active]
    assert _comparable(got) == _comparable(want)


async def prepare(
    fake: FakeEngine, session: aiohttp.ClientSession, url: str
) -> list[asyncio.Task[aiohttp.ClientResponse]]:
    """Bring the fake to the capture's state; returns the requests it left running."""
    pending: list[asyncio.Task[aiohttp.ClientResponse]] = []
    if isinstance(fake, FakeOllama):  # loaded: the model served one request
        body = {"model": "qwen2.5:0.5b", "messages": [{"role": "user", "content": "hi"}]}
        async with session.post(url + "/api/chat", json={**body, "stream": False}) as r:
            await r.read()
    if isinstance(fake, FakeVLLM):  # busy: 4 requests on 2 slots
        fake.hold()
        body = {"model": "qwen2.5-0.5b", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(4):
            pending.append(
                asyncio.create_task(session.post(url + "/v1/chat/completions", json=body))
            )
        await fake.until(lambda: fake.running() + fake.waiting() == 4)
    return pending


async def test_fake_ollama_resolves_like_its_capture() -> None:
    o = ENGINES / "ollama/v0.34.4"
    bodies = {
        "/api/version": o / "idle/api_version",
        "/api/tags": o / "idle/api_tags",
        "/api/ps": o / "loaded/api_ps",
        "/v1/models": o / "busy/v1_models",
    }
    await _both(FakeOllama([FakeModel("qwen2.5:0.5b")], sleep=no_sleep), bodies, Kind.OLLAMA)


async def test_fake_llamacpp_resolves_like_its_capture() -> None:
    c = ENGINES / "llamacpp/v0.5.0"
    bodies = {
        "/props": c / "loaded/props",
        "/slots": c / "loaded/slots",
        "/metrics": c / "loaded/metrics",
        "/v1/models": c / "loaded/v1_models",
        "/models": c / "loaded/v1_models",
    }
    await _both(FakeLlamaCpp(sleep=no_sleep), bodies, Kind.LLAMACPP)


async def test_fake_vllm_resolves_like_its_capture() -> None:
    v = ENGINES / "vllm/v0.30.0"
    bodies = {"/v1/models": v / "busy/v1_models", "/metrics": v / "busy/metrics"}
    fake = FakeVLLM(sleep=no_sleep, serve_version=False)  # no /version body was recorded
    await _both(fake, bodies, Kind.VLLM)
