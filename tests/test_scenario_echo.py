"""benchmarks/scenario's client: with echo, the next turn's history holds the reply the engine
streamed (as chat UIs send it back); without, the session's own answer."""

from __future__ import annotations

import json
import time

import aiohttp
import pytest
from aiohttp import web
from benchmarks.scenario.client import TurnResult, replay
from benchmarks.scenario.conversations import Conversation, Turn

GENERATED = "the engine's own words"


async def _engine(bodies: list[dict[str, object]]) -> tuple[web.AppRunner, str]:
    async def chat(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.json())
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        for piece in ("the engine's ", "own words"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await reply.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await reply.write(b"data: [DONE]\n\n")
        return reply

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


# echo: the flag; sent_back: the assistant message turn 2 carries
CASES = [(True, GENERATED), (False, "ShareGPT's answer")]


@pytest.mark.parametrize(("echo", "sent_back"), CASES)
async def test_the_second_turn_carries_the_reply_echo_chooses(echo: bool, sent_back: str) -> None:
    bodies: list[dict[str, object]] = []
    runner, base = await _engine(bodies)
    turns = (Turn(0.0, "first?", "ShareGPT's answer", 8), Turn(0.0, "second?", "unused", 8))
    conv = Conversation("u", 0, None, "m", "be brief", turns)
    out: list[TurnResult] = []
    try:
        async with aiohttp.ClientSession() as http:
            start = time.monotonic()
            await replay("p", [conv], lambda _c: base, http, start, start + 30, out, echo)
    finally:
        await runner.cleanup()
    assert [t.error for t in out] == ["", ""]
    assert out[0].reply is not None and out[0].reply.text == GENERATED
    second = bodies[1]["messages"]
    assert isinstance(second, list)
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == sent_back
