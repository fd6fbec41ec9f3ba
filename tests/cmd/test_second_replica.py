"""A real Pharos in front of two fake Ollama hosts (issue 15): while a model's only warm host
has both slots busy, the next request loads it on the other host, which has room, instead of
queueing behind them; nothing already loaded is unloaded for it."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

from pharos.cmd.runtime import Pharos, running
from pharos.config.schema import Backend, Config
from pharos.engine.types import Kind
from pharos.fakeengine import FakeModel, FakeOllama, no_sleep, serve

BOUND_S = 10.0
MODEL = "qwen2.5:0.5b"


def chat() -> dict[str, object]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def test_a_request_that_would_queue_loads_the_model_where_a_host_has_room() -> None:
    models = [FakeModel(MODEL), FakeModel("other:1b")]
    warm, roomy = FakeOllama(models, sleep=no_sleep), FakeOllama(models, sleep=no_sleep)
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(fake)) for fake in (warm, roomy)]
        session = await stack.enter_async_context(aiohttp.ClientSession())
        async with session.post(f"{urls[0]}/v1/chat/completions", json=chat()) as response:
            assert response.status == 200  # the model is loaded on the first host only
            await response.read()
        assert list(warm.loaded()) == [MODEL] and not roomy.loaded()
        backends = tuple(
            Backend(url=url, kind=Kind.OLLAMA, memory_gb=2.0, capacity=2) for url in urls
        )
        pharos = Pharos(Config(backends=backends))
        base = await stack.enter_async_context(running(pharos))
        assert await pharos.wait_ready(BOUND_S)
        for fake in (warm, roomy):
            fake.hold(after_tokens=1)

        async def send() -> int:
            async with session.post(f"{base}/v1/chat/completions", json=chat()) as response:
                await response.read()
                return response.status

        async with asyncio.timeout(BOUND_S):
            first_two = [asyncio.create_task(send()) for _ in range(2)]
            await warm.until(lambda: warm.running(MODEL) == 2)
            third = asyncio.create_task(send())
            await roomy.until(lambda: roomy.running(MODEL) == 1)  # not queued behind the two
            assert list(warm.loaded()) == [MODEL]  # nothing unloaded for it
            warm.release()
            roomy.release()
            assert await asyncio.gather(*first_two, third) == [200, 200, 200]
