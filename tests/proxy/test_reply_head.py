"""The reply's head leaves with the first bytes of the stream, and never waits for them.

aiohttp sends a StreamResponse's head at prepare(), in a write of its own; the forwarder's
ReplyHead holds it for the first write, which it makes right after prepare(): the bytes the
engine sent with its own head, or nothing, which sends the head alone then (an engine that
answers its head at once and its first event after a long prefill).
"""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import make_mocked_request

from pharos.fakeengine import FakeVLLM, no_sleep
from pharos.proxy.upstream import ReplyHead
from tests.proxy.rig import Backend, RigFactory, answer_posts

MODEL = "qwen2.5-0.5b"
FIRST_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
LAST_EVENT = b"data: [DONE]\n\n"


class RecordingTransport:
    """The socket side of a StreamWriter: every write the response made, as sent."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, chunks: list[bytes]) -> None:
        self.writes.append(b"".join(chunks))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, _name: str, default: object = None) -> object:
        return default


async def writes_of(
    response: web.StreamResponse, first: bytes, *, then: bytes | None = None
) -> list[bytes]:
    transport = RecordingTransport()
    protocol = mock.Mock(transport=transport)
    writer = StreamWriter(protocol, asyncio.get_running_loop())
    request = make_mocked_request(
        "POST", "/v1/chat/completions", writer=writer, transport=transport, protocol=protocol
    )
    response.headers["Content-Type"] = "text/event-stream"
    await response.prepare(request)
    await response.write(first)
    if then is not None:
        await response.write(then)
    return transport.writes


async def test_the_reply_head_and_the_first_event_go_out_in_one_write() -> None:
    writes = await writes_of(ReplyHead(status=200), FIRST_EVENT)
    assert len(writes) == 1
    head, _, body = writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert body == b"%x\r\n%s\r\n" % (len(FIRST_EVENT), FIRST_EVENT)


async def test_a_plain_stream_response_sends_its_head_alone_which_is_what_reply_head_saves() -> (
    None
):
    writes = await writes_of(web.StreamResponse(status=200), FIRST_EVENT)
    assert len(writes) == 2


async def test_an_empty_first_write_sends_the_head_alone_at_once() -> None:
    writes = await writes_of(ReplyHead(status=200), b"", then=FIRST_EVENT)
    assert len(writes) == 2
    assert writes[0].startswith(b"HTTP/1.1 200 OK") and writes[0].endswith(b"\r\n\r\n")


class SlowFirstEvent:
    """Streams chats as an engine in a long prefill: its head at once (and `early`, the start
    of the first event's line, which the tap holds until its newline), then nothing until
    `go` is set, then the rest of the event and the end."""

    def __init__(self, fake: FakeVLLM, early: bytes) -> None:
        self.go = asyncio.Event()
        self.early = early
        answer_posts(fake, self._post)

    async def _post(self, request: web.Request) -> web.StreamResponse | None:
        await request.read()
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)  # aiohttp: the head goes out alone, now
        if self.early:
            await response.write(self.early)
        await self.go.wait()
        await response.write(FIRST_EVENT[len(self.early) :])
        await response.write(LAST_EVENT)
        await response.write_eof()
        return response


@pytest.mark.parametrize(
    "early",
    [
        b"",  # the engine's head alone: nothing to send with ours
        FIRST_EVENT[:10],  # a line begun: the tap holds it, so the first write is empty
    ],
)
async def test_the_client_gets_the_head_while_the_engine_has_sent_no_whole_event_yet(
    rig: RigFactory, early: bytes
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    engine = SlowFirstEvent(fake, early)
    r = await rig(Backend(fake))
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with asyncio.timeout(5.0):
        response = await r.client.post(r.base + "/v1/chat/completions", json=body)
    try:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        assert not response.content.is_eof()
        engine.go.set()
        async with asyncio.timeout(5.0):
            streamed = await response.read()
    finally:
        response.release()
    assert streamed == FIRST_EVENT + LAST_EVENT
