"""The engine's last read leaves with the stream's end in one write (the head too when the
whole reply came in one read): the client gets the same bytes, usage stripped and counted,
however the engine split its reply."""

from __future__ import annotations

import pytest
from aiohttp import web

from pharos.fakeengine import FakeVLLM, no_sleep
from tests.proxy.rig import Backend, RigFactory, answer_posts

MODEL = "qwen2.5-0.5b"
EVENTS = [
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
]
USAGE_EVENT = (
    b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}\n\n'
)
DONE_EVENT = b"data: [DONE]\n\n"


class SplitReplies:
    """Answers streamed chats with the events below, in the writes `split` says."""

    def __init__(self, fake: FakeVLLM, split: str) -> None:
        self.split = split
        answer_posts(fake, self._post)

    async def _post(self, request: web.Request) -> web.StreamResponse | None:
        await request.read()
        stream = b"".join([*EVENTS, USAGE_EVENT, DONE_EVENT])
        if self.split == "with the head":  # Content-Length: head and body in one read
            return web.Response(status=200, body=stream, content_type="text/event-stream")
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)  # the head alone
        if self.split == "after the head":
            await response.write_eof(stream)  # the body and the chunked end in one write
        else:  # an event a write, the end alone
            for event in [*EVENTS, USAGE_EVENT, DONE_EVENT]:
                await response.write(event)
            await response.write_eof()
        return response


@pytest.mark.parametrize(
    "split",
    [
        # (how the engine writes its reply)
        "with the head",  # the whole reply in the head's read: ended before the first write
        "after the head",  # one read of body after the head: ended after it
        "event by event",  # a write per event, then the end alone
    ],
)
async def test_the_client_gets_the_whole_stream_however_the_engine_split_it(
    rig: RigFactory, split: str
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    SplitReplies(fake, split)
    r = await rig(Backend(fake))
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(2):  # the second one on the kept-alive connections, both sides
        async with r.client.post(r.base + "/v1/chat/completions", json=body) as reply:
            assert reply.status == 200
            assert reply.headers["Content-Type"] == "text/event-stream"
            streamed = await reply.read()
        assert streamed == b"".join([*EVENTS, DONE_EVENT])  # Pharos's usage chunk stripped
    await r.until_done(2)
    for done in r.done:
        assert (done.status, done.prompt_tokens, done.completion_tokens) == (200, 7, 2)
        assert done.metered is True
        assert ("upstream", "ok") in done.decisions
