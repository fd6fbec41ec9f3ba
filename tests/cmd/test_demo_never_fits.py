"""`pharos demo`'s own llama3.2:1b example hung forever: the model (1.2 GiB on disk) was larger
than the fake Ollama host's memory_gb (1.0). The demo now has room for it (2.5); a host that
has none fails at once, naming both (issue 11, "Time")."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import msgspec

from pharos.cmd.demo import DEMO_MODEL, demo_config
from pharos.cmd.runtime import Pharos, running
from pharos.fakeengine import FakeLlamaCpp, FakeModel, FakeOllama, FakeVLLM, no_sleep, serve

BOUND_S = 5.0


async def test_a_model_too_large_for_every_host_is_answered_at_once() -> None:
    fakes = (
        FakeOllama(
            [FakeModel(DEMO_MODEL), FakeModel("llama3.2:1b", 1_321_098_329, 2_019_000_000)],
            sleep=no_sleep,
        ),
        FakeLlamaCpp(sleep=no_sleep),
        FakeVLLM(sleep=no_sleep),
    )
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(fake)) for fake in fakes]
        demo = demo_config(urls)
        small = msgspec.structs.replace(demo.backends[0], memory_gb=1.0)
        pharos = Pharos(msgspec.structs.replace(demo, backends=(small, *demo.backends[1:])))
        base = await stack.enter_async_context(running(pharos))
        assert await pharos.wait_ready(10.0)
        session = await stack.enter_async_context(aiohttp.ClientSession())
        body = {"model": "llama3.2:1b", "messages": [{"role": "user", "content": "hi"}]}
        async with asyncio.timeout(BOUND_S):
            async with session.post(f"{base}/v1/chat/completions", json=body) as response:
                status, reply = response.status, await response.json()
        assert status == 503, reply
        assert reply["error"]["code"] == "model_too_large"
        assert "1.2 GB" in reply["error"]["message"] and "1.0 GB" in reply["error"]["message"]
        assert pharos.sched.waiting_count() == 0
