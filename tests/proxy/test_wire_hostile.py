"""Layer 3: an engine that breaks HTTP gets the client a clear answer and Pharos logs no
traceback (issue 13's lean upstream client, proxy/wire.py, replaced aiohttp's).

The fake answers the scraper as a llama.cpp server and every POST with the raw bytes of one
case below, written straight to its socket: a broken status line, a head past every size
bound, chunk framing that isn't, a connection closed or gone silent mid-reply. Before the
reply's head reached Pharos nothing was written to the client, so it gets a JSON error;
after it, the client's stream is cut without its last chunk (a visible truncation), never
passed off as complete.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from pharos.config import Duration, Limits
from pharos.fakeengine import FakeLlamaCpp, no_sleep
from tests.proxy.rig import Backend, RigFactory, answer_posts

MODEL = "qwen2.5-0.5b"
CHAT = "/v1/chat/completions"
IDLE = Limits(upstream_idle=Duration("300ms"))
BOUND_S = 5.0

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
FIRST_CHUNK = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)


@dataclass(frozen=True)
class Case:
    raw: bytes  # written to the socket as the reply to every POST
    then: str  # "close": close the connection after it; "stall": send nothing more


@dataclass(frozen=True)
class Expected:
    status: int
    body: str | bytes  # the error code of a JSON error, or the bytes the body starts with
    ended: str  # "eof": the body ended cleanly; "cut": the connection closed mid-body
    upstream: str  # the request's upstream decision
    ejected: bool


class Hostile:
    """Answers POSTs with `case`'s bytes on the raw socket; GETs (the scraper) as the fake."""

    def __init__(self, fake: FakeLlamaCpp, case: Case) -> None:
        self.case = case
        self.posts = 0
        self.stalled = asyncio.Event()
        answer_posts(fake, self._post)

    async def _post(self, request: web.Request) -> web.StreamResponse | None:
        await request.read()
        self.posts += 1
        transport = request.transport
        assert transport is not None
        transport.write(self.case.raw)
        if self.case.then == "stall":
            await self.stalled.wait()  # set at the test's end: the handler then returns
        transport.close()
        raise web.HTTPServiceUnavailable()  # never written: the socket is closed


def chat(stream: bool) -> dict[str, object]:
    return {"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}


async def answer(r_client: aiohttp.ClientSession, url: str, stream: bool) -> tuple[int, bytes, str]:
    """(status, the body bytes the client got, how the body ended: "eof" or the error)."""
    async with r_client.post(url, json=chat(stream)) as response:
        got = bytearray()
        try:
            async for piece in response.content.iter_any():
                got += piece
            ended = "eof"
        except aiohttp.ClientPayloadError:
            ended = "cut"
        return response.status, bytes(got), ended


BROKEN = Expected(503, "backend_unavailable", "eof", "bad_reply", True)
"""No HTTP reply, or its body broken before a byte reached the client: ejected, the request
retried elsewhere (here nowhere: 503). Under aiohttp the rows with a broken head or framing in
the head's read were a Pharos 500 with a traceback (its parser's exception reached the
handler); a 500 cut short was already this 503 (as connect_failed)."""
CUT = Expected(200, EVENT, "cut", "died_mid_reply", True)
"""The head came, the body broke: the client's stream is cut, the backend ejected."""

# raw reply written                                  then      client streams  expected      id
CASES = [
    pytest.param(b"HTTP/1.1 abc OK\r\n\r\n", "close", True, BROKEN, id="bad status line"),
    pytest.param(b"hello there\r\n\r\n", "close", True, BROKEN, id="not http"),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n", "close", True, BROKEN,
        id="a 100 KB header",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 20_000 + b"\r\n", "close", True, BROKEN,
        id="20k headers",
    ),
    pytest.param(b"HTTP/1.1 200 OK\r\nnonsense\r\n\r\n", "close", True, BROKEN, id="no colon"),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", "close", True, BROKEN,
        id="unknown transfer-encoding",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nContent-Length: x1\r\n\r\n{}", "close", False, BROKEN,
        id="bad content-length",
    ),
    pytest.param(b"HTTP/1.1 200 OK\r\nX-A: b\r\n", "close", True, BROKEN, id="closed in head"),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nX-A: b\r\n", "stall", True,
        Expected(504, "upstream_timeout", "eof", "idle_timeout", False),
        id="head never ends",
    ),
    pytest.param(SSE_HEAD + FIRST_CHUNK + b"zz\r\nab\r\n", "close", True, CUT, id="bad chunk size"),
    pytest.param(
        SSE_HEAD + b"3\r\nabcdef\r\n", "close", True, BROKEN, id="chunk longer than said"
    ),
    pytest.param(SSE_HEAD + FIRST_CHUNK + b"40\r\nabc", "close", True, CUT, id="closed mid chunk"),
    pytest.param(SSE_HEAD + FIRST_CHUNK, "close", True, CUT, id="closed after a chunk"),
    pytest.param(
        SSE_HEAD + FIRST_CHUNK, "stall", True,
        Expected(200, EVENT, "cut", "idle_timeout", False),
        id="silent after a chunk",
    ),
    pytest.param(
        JSON_HEAD + b"Content-Length: 100\r\n\r\n{}", "close", False,
        Expected(200, b"{}", "cut", "died_mid_reply", True),
        id="short content-length",
    ),
    pytest.param(
        b"HTTP/1.1 500 Oops\r\nContent-Length: 100\r\n\r\n{}", "close", False,
        BROKEN,
        id="a 500 cut short",
    ),
    pytest.param(
        JSON_HEAD + b'\r\n{"a":1}', "close", False,
        Expected(200, b'{"a":1}', "eof", "ok", False),
        id="body to the close",
    ),
    pytest.param(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", "close",
        False, Expected(200, b"{}", "eof", "ok", False),
        id="100 continue first",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "then", "stream", "expected"), CASES)
async def test_a_hostile_engine_gets_the_client_a_clear_answer_and_no_traceback(
    rig: RigFactory,
    caplog: pytest.LogCaptureFixture,
    raw: bytes,
    then: str,
    stream: bool,
    expected: Expected,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    hostile = Hostile(fake, Case(raw, then))
    r = await rig(Backend(fake), limits=IDLE)
    try:
        async with asyncio.timeout(BOUND_S):
            got_status, body, got_end = await answer(r.client, r.base + CHAT, stream)
        await r.until_done(1)
    finally:
        hostile.stalled.set()
    done = r.done[0]
    [backend] = r.pharos.state.backends()
    assert (got_status, got_end) == (expected.status, expected.ended), body[:200]
    if isinstance(expected.body, str):
        assert json.loads(body)["error"]["code"] == expected.body
    else:
        assert body.startswith(expected.body), body[:200]
    assert ("upstream", expected.upstream) in done.decisions, done.decisions
    assert (backend.ejected is not None) is expected.ejected, backend.ejected
    assert hostile.posts == 1  # a broken reply is never sent to the same engine twice
    assert not [rec for rec in caplog.records if rec.exc_info], "a traceback was logged"
    assert r.inflight() == 0
