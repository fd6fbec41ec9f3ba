"""From the outside in: a real Pharos in front of two fake llama.cpp servers, two API keys
(issue 15). Alice's first chat ends on one engine; then another client takes one of that
engine's two slots behind Pharos's back, seen at the next scrape. Alice's next chat, which
shares nothing with her first, still goes to that engine, where her last one went: without her
key's home it would go to the idle engine (the least utilized)."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

from pharos.clock import FakeClock
from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config.schema import Backend, Config, Key
from pharos.engine.types import Kind
from pharos.fakeengine import FakeLlamaCpp, no_sleep, serve
from pharos.proxy.auth import hash_key
from pharos.state.spec import StateOptions

BOUND_S = 10.0
MODEL = "qwen2.5-0.5b"
FAST = StateOptions(fast_interval_s=0.02, full_interval_s=0.02)
KEYS = {"alice": "sk-alice-0123456789", "bob": "sk-bob-0123456789"}


def chat(system: str, user: str) -> dict[str, object]:
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "stream": True,
    }


async def post(session: aiohttp.ClientSession, url: str, key: str, body: dict[str, object]) -> int:
    headers = {"Authorization": f"Bearer {KEYS[key]}"}
    async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as reply:
        await reply.read()
        return reply.status


def chats(fake: FakeLlamaCpp) -> int:
    return fake.counters.by_path["/v1/chat/completions"]


async def engine_running_seen(pharos: Pharos, clock: FakeClock, target_url: str) -> None:
    """Until a scrape after the clock moved reports one request running on `target_url`."""
    while True:
        for view in pharos.state.targets_for_model(MODEL, clock.now()):
            if view.backend_url == target_url and view.running == 1:
                return
        await asyncio.sleep(FAST.fast_interval_s)


async def test_a_keys_next_chat_goes_where_its_last_chat_ended_not_to_the_idle_engine() -> None:
    fakes = [FakeLlamaCpp(MODEL, sleep=no_sleep), FakeLlamaCpp(MODEL, sleep=no_sleep)]
    clock = FakeClock()
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(fake)) for fake in fakes]
        session = await stack.enter_async_context(aiohttp.ClientSession())
        keys = tuple(Key(name=name, sha256=hash_key(secret)) for name, secret in KEYS.items())
        backends = tuple(Backend(url=url, kind=Kind.LLAMACPP) for url in urls)
        config = Config(backends=backends, keys=keys)
        pharos = Pharos(config, clock=clock, options=RuntimeOptions(FAST))
        base = await stack.enter_async_context(running(pharos))
        assert await pharos.wait_ready(BOUND_S)
        async with asyncio.timeout(BOUND_S):
            assert await post(session, base, "alice", chat("You plan trips.", "Rome?")) == 200
            home = 0 if chats(fakes[0]) else 1
            other = 1 - home
            clock.advance(5.0)
            # a client Pharos doesn't see takes one of home's two slots and keeps it
            fakes[home].hold(after_tokens=1)
            direct = asyncio.create_task(
                session.post(f"{urls[home]}/v1/chat/completions", json=chat("x", "y"))
            )
            await fakes[home].until(lambda: fakes[home].running() == 1)
            await engine_running_seen(pharos, clock, urls[home])
            alice = asyncio.create_task(
                post(session, base, "alice", chat("You write poems.", "Spring."))
            )
            arrived = [  # hers reached home (held there), or the other engine (answered)
                asyncio.create_task(fakes[home].until(lambda: fakes[home].running() == 2)),
                asyncio.create_task(fakes[other].until(lambda: chats(fakes[other]) > 0)),
            ]
            _, pending = await asyncio.wait(arrived, return_when=asyncio.FIRST_COMPLETED)
            for waiting in pending:
                waiting.cancel()
            assert chats(fakes[home]) == 3  # her first chat, the other client's, her second
            assert chats(fakes[other]) == 0
            fakes[home].release()
            assert await alice == 200
            (await direct).release()
