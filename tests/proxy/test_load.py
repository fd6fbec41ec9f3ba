"""Load (issue 11): scrapes never queue behind inference traffic, and the proxy's
connection pool never caps concurrency below what the targets take."""

from __future__ import annotations

import asyncio

import aiohttp

from pharos.fakeengine import FakeLlamaCpp, Ledger, no_sleep
from pharos.state import StateOptions
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5-0.5b"
CHAT = "/v1/chat/completions"
STREAMS = 150
"""The load that got a healthy engine marked down twice in 30 s (issue 11)."""
LOADED_STATE = StateOptions(
    fast_interval_s=0.05,
    full_interval_s=0.05,
    scrape_timeout_s=0.8,  # the default: a scrape that waits for a pooled connection misses it
    resolve_timeout_s=2.0,
    jitter_fraction=0.0,
    stale_factor=40.0,  # staleness is not what this tests: a 2-core machine lags under load
)


async def test_an_engine_holding_150_streams_stays_up_and_every_request_is_served(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(ledger=Ledger(slots=STREAMS + 10), sleep=no_sleep)
    r = await rig(Backend(fake), state=LOADED_STATE)
    url = r.urls[0]

    def scrapes() -> int:
        return sum(count for path, count in fake.counters.by_path.items() if path != CHAT)

    fake.hold()
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as client:

        async def chat() -> int:
            async with client.post(r.base + CHAT, json=body) as response:
                await response.read()
                return response.status

        replies = [asyncio.create_task(chat()) for _ in range(STREAMS)]
        await r.until(
            lambda: fake.running() == STREAMS, f"{STREAMS} streams held on the engine", 30.0
        )
        before = scrapes()
        await r.until(lambda: scrapes() >= before + 10, "ten scrapes while the streams are held")
        (status,) = [b for b in r.pharos.state.backends() if b.url == url]
        assert status.up and status.reachable and status.down_reason is None, status
        fake.release()
        statuses = await asyncio.gather(*replies)
    assert statuses == [200] * STREAMS
    assert r.backend_up(url)
