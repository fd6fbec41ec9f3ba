"""Nothing waits forever (issue 11, "Time"): an engine that goes silent is cut after
limits.upstream_idle, counted as upstream=idle_timeout and not ejected (it may just be
slow); a request queued past limits.queue_wait is a 503 with Retry-After and the reason."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from pharos.config import Duration, Limits
from pharos.fakeengine import FakeLlamaCpp, Ledger, no_sleep
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5-0.5b"
CHAT = "/v1/chat/completions"
IDLE = Limits(upstream_idle=Duration("300ms"))
BOUND_S = 5.0


def chat_body(stream: bool) -> dict[str, object]:
    return {"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}


async def test_a_stream_that_goes_silent_is_cut_and_counted(rig: RigFactory) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    r = await rig(Backend(fake), limits=IDLE)
    fake.hold(after_tokens=2)
    async with r.client.post(r.base + CHAT, json=chat_body(stream=True)) as response:
        assert response.status == 200
        assert (await response.content.readuntil(b"\n\n")).startswith(b"data: ")
        async with asyncio.timeout(BOUND_S):
            with pytest.raises(aiohttp.ClientPayloadError):  # a visible truncation
                await response.content.read()
    await r.until_done(1)
    assert ("upstream", "idle_timeout") in r.done[0].decisions
    assert r.backend_up(r.urls[0])
    await r.until(lambda: r.inflight() == 0, "the slot given back")
    fake.release()


async def test_a_reply_whose_headers_never_come_is_a_504_and_not_retried(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    r = await rig(Backend(fake), Backend(FakeLlamaCpp(sleep=no_sleep)), limits=IDLE)
    fake.hold()
    other = r.fakes[1]
    other.hold()
    async with asyncio.timeout(BOUND_S):
        status, reply = await r.post(CHAT, chat_body(stream=False))
    assert status == 504, reply
    assert reply["error"]["code"] == "upstream_timeout"
    await r.until_done(1)
    assert ("upstream", "idle_timeout") in r.done[0].decisions
    assert sum(f.counters.by_path.get(CHAT, 0) for f in r.fakes) == 1  # never sent twice
    assert all(r.backend_up(url) for url in r.urls)
    fake.release()
    other.release()


async def test_a_request_waiting_past_limits_queue_wait_is_a_503_with_the_reason(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(ledger=Ledger(slots=1), sleep=no_sleep)
    r = await rig(Backend(fake), limits=Limits(queue_wait=Duration("300ms")))
    fake.hold()
    first = asyncio.create_task(r.chat(MODEL, "first", stream=True))
    await r.until(lambda: r.inflight() == 1, "the first request running")
    async with r.client.post(r.base + CHAT, json=chat_body(stream=False)) as response:
        status, headers, reply = response.status, response.headers, await response.json()
    assert status == 503, reply
    assert reply["error"]["code"] == "queue_timeout"
    assert "limits.queue_wait" in reply["error"]["message"]
    assert headers["Retry-After"] == "30"
    assert r.pharos.sched.waiting_count() == 0
    fake.release()
    assert (await first)[0] == 200
    assert ("route", "queue_timeout") in [d for done in r.done for d in done.decisions]
