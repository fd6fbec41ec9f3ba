"""Layer 3: what the client's headers become on the way to the engine, through Pharos's own
upstream client (proxy/pool.py)."""

from __future__ import annotations

from aiohttp import web

from pharos.fakeengine import FakeVLLM, no_sleep
from tests.proxy.rig import Backend, RigFactory, answer_posts

MODEL = "qwen2.5-0.5b"


class Headers:
    """The headers of every POST the fake is sent."""

    def __init__(self, fake: FakeVLLM) -> None:
        self.seen: list[dict[str, str]] = []
        answer_posts(fake, self._post)

    async def _post(self, request: web.Request) -> None:
        self.seen.append(dict(request.headers))


async def test_a_header_in_any_script_reaches_the_engine_and_hop_headers_do_not(
    rig: RigFactory,
) -> None:
    """A CJK header value made the latin-1 encoding of the request head raise: a 500."""
    fake = FakeVLLM(sleep=no_sleep)
    headers = Headers(fake)
    r = await rig(Backend(fake))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    status, _ = await r.post(
        "/v1/chat/completions",
        body,
        headers={
            "X-Title": "中文 — é",
            "Authorization": "Bearer sk-client",
            "Accept-Encoding": "gzip",
            "Keep-Alive": "timeout=5",
        },
    )
    assert status == 200
    [seen] = headers.seen
    assert seen["X-Title"] == "中文 — é"
    assert "Authorization" not in seen
    assert "Keep-Alive" not in seen
    assert "gzip" not in seen.get("Accept-Encoding", "")
    assert seen["Content-Type"] == "application/json"
    assert seen["Host"] == r.urls[0].removeprefix("http://")
