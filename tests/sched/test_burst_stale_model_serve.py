"""From the outside in: a real Pharos in front of two fake Ollama hosts (issue 15). The second
host holds another model that Pharos served once and that fills its memory_gb. While the
first host's two slots are busy, a third request for the model loads it on the second host
only once that other model has sat idle for IDLE_MODEL_STALE_S (by Pharos's injected clock);
before that it queues for the first host.

The hosts report their loaded models' size as VRAM (a GPU host, where Ollama's /api/ps
size_vram is what the model holds): the recorded CPU host reports size_vram 0, which Pharos
counts as a footprint of 0 bytes, so no load there ever unloads anything in its memory model."""

from __future__ import annotations

import asyncio
import contextlib
import json

import aiohttp
import pytest
from aiohttp import web

from pharos.clock import FakeClock
from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config.schema import Backend, Config
from pharos.engine.types import Kind, Residency
from pharos.fakeengine import FakeModel, FakeOllama, no_sleep, serve
from pharos.sched.fits import IDLE_MODEL_STALE_S
from pharos.state.spec import StateOptions

BOUND_S = 10.0
MODEL = "qwen2.5:0.5b"
OTHER = "other:1b"
MEMORY_GB = 1.0
"""GiB: the other model loaded (721 MB in /api/ps) leaves no room for this one's 398 MB."""
FAST = StateOptions(fast_interval_s=0.02, full_interval_s=0.02)


class GpuOllama(FakeOllama):
    """FakeOllama whose /api/ps reports each loaded model's size as its size_vram."""

    async def _ps(self, request: web.Request) -> web.Response:
        response = await super()._ps(request)
        assert response.body is not None
        body = json.loads(bytes(response.body))  # type: ignore[arg-type]
        for entry in body["models"]:
            entry["size_vram"] = entry["size"]
        return web.json_response(body)


def chat(model: str) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def post(session: aiohttp.ClientSession, url: str, model: str) -> int:
    async with session.post(f"{url}/v1/chat/completions", json=chat(model)) as response:
        await response.read()
        return response.status


async def fresh_residency(pharos: Pharos, clock: FakeClock) -> None:
    """Until a scrape round after the clock moved reports both models loaded somewhere."""
    while True:
        views = [
            *pharos.state.targets_for_model(MODEL, clock.now()),
            *pharos.state.targets_for_model(OTHER, clock.now()),
        ]
        if sum(v.residency is Residency.LOADED for v in views) == 2:
            return
        await asyncio.sleep(FAST.fast_interval_s)


async def queued(pharos: Pharos) -> None:
    """Until a request waits in Pharos's fair queue (bounded by the caller's timeout)."""
    while True:
        if pharos.sched.waiting_count() >= 1:
            return
        await asyncio.sleep(FAST.fast_interval_s)


@pytest.mark.parametrize(
    ("idle_s", "third_loads_it_on_the_second_host"),
    [
        (IDLE_MODEL_STALE_S + 1, True),
        (IDLE_MODEL_STALE_S - 1, False),
    ],
)
async def test_a_queued_request_loads_a_replica_over_a_model_idle_past_the_bound(
    idle_s: float, third_loads_it_on_the_second_host: bool
) -> None:
    models = [FakeModel(MODEL), FakeModel(OTHER)]
    first, second = GpuOllama(models, sleep=no_sleep), GpuOllama(models, sleep=no_sleep)
    clock = FakeClock()
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(fake)) for fake in (first, second)]
        session = await stack.enter_async_context(aiohttp.ClientSession())
        assert await post(session, urls[0], MODEL) == 200  # loaded on the first host only
        assert await post(session, urls[1], OTHER) == 200  # and the other on the second
        backends = tuple(
            Backend(url=url, kind=Kind.OLLAMA, memory_gb=MEMORY_GB, capacity=2) for url in urls
        )
        pharos = Pharos(Config(backends=backends), clock=clock, options=RuntimeOptions(FAST))
        base = await stack.enter_async_context(running(pharos))
        assert await pharos.wait_ready(BOUND_S)
        async with asyncio.timeout(BOUND_S):
            assert await post(session, base, OTHER) == 200  # Pharos's own reply there
            assert second.counters.loads == 1
            clock.advance(idle_s)
            await fresh_residency(pharos, clock)
            for fake in (first, second):
                fake.hold(after_tokens=1)
            first_two = [asyncio.create_task(post(session, base, MODEL)) for _ in range(2)]
            await first.until(lambda: first.running(MODEL) == 2)
            third = asyncio.create_task(post(session, base, MODEL))
            if third_loads_it_on_the_second_host:
                await second.until(lambda: second.running(MODEL) == 1)
            else:
                await queued(pharos)
                assert second.running(MODEL) == 0
            first.release()
            second.release()
            assert await asyncio.gather(*first_two, third) == [200, 200, 200]
        assert (second.counters.loads == 2) is third_loads_it_on_the_second_host
