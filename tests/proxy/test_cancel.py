"""A client that leaves frees its slot or its place in the queue (spec §8 "Cancellation")."""

from __future__ import annotations

import asyncio
import contextlib

from pharos.fakeengine import FakeLlamaCpp, Ledger, no_sleep
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5-0.5b"
CHAT = "/v1/chat/completions"


def chat_body(content: str) -> dict[str, object]:
    return {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": content}]}


async def test_a_client_leaving_mid_stream_frees_the_slot_and_stops_the_engine(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    r = await rig(Backend(fake))
    fake.hold(after_tokens=2)
    response = await r.client.post(r.base + CHAT, json=chat_body("stream"))
    assert (await response.content.readuntil(b"\n\n")).startswith(b"data: ")
    assert r.inflight() == 1 and fake.running() == 1
    response.close()  # the client goes away mid-stream
    await r.until(lambda: r.inflight() == 0, "Pharos's slot released")
    await r.until_done(1)
    assert ("upstream", "client_left") in r.done[0].decisions
    assert r.done[0].status == 499
    # The fake notices a closed connection only when it next writes (its server does not
    # cancel handlers), so release it: the reply must stop there, not run to its end.
    fake.release()
    await r.until(lambda: fake.running() == 0, "the upstream request aborted")
    assert fake.counters.completion_tokens < fake.ledger.reply_tokens
    status, reply = await r.chat(MODEL, "next")
    assert status == 200, reply


async def test_a_client_leaving_the_queue_leaves_it_and_takes_no_slot(rig: RigFactory) -> None:
    fake = FakeLlamaCpp(ledger=Ledger(slots=1), sleep=no_sleep)
    r = await rig(Backend(fake))
    fake.hold()
    first = asyncio.create_task(r.chat(MODEL, "first", stream=True))
    await r.until(lambda: r.inflight() == 1 and fake.running() == 1, "the first request running")
    waiting = asyncio.create_task(r.chat(MODEL, "second", stream=True))
    await r.until(lambda: r.pharos.sched.waiting_count() == 1, "the second request queued")
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await r.until(lambda: r.pharos.sched.waiting_count() == 0, "the queue empty")
    await r.until_done(1)
    assert r.done[0].decisions[-1] == ("route", "client_left")
    fake.release()
    assert (await first)[0] == 200
    await r.until(lambda: r.inflight() == 0, "every slot back")
    assert fake.counters.by_path[CHAT] == 1  # the request that left never reached the engine
