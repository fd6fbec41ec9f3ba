"""Layer 3: an engine that answers no info route while it generates, behind a real Pharos.

llama-cpp-python's server (live, 0.3.36) answers nothing, /v1/models included, while a reply
is generating. The fake here does the same: every GET waits until it has nothing running (or,
with `always`, never answers), so Pharos's scrape rounds time out exactly while its own
requests are in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from pharos.fakeengine import FakeLlamaCpp, no_sleep
from pharos.state import StateOptions
from tests.proxy.rig import Backend, Rig, RigFactory, add_middleware, rig

__all__ = ["rig"]

MODEL = "qwen2.5-0.5b"
CHAT = "/v1/chat/completions"
SILENT_STATE = StateOptions(
    fast_interval_s=0.02,
    full_interval_s=0.02,
    scrape_timeout_s=0.1,
    resolve_timeout_s=0.5,
    jitter_fraction=0.0,
    stale_factor=5.0,  # a round older than 0.1 s is stale: the bound on silence
)
STALE_FOR_S = 1.0  # ten times the bound: far past it


class SilentWhileGenerating:
    """Holds every GET until the fake has nothing running; `always` holds them regardless."""

    def __init__(self, fake: FakeLlamaCpp) -> None:
        self.fake = fake
        self.always = False
        self._forever = asyncio.Event()
        add_middleware(fake, self._middleware)

    @web.middleware
    async def _middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if request.method == "GET":
            if self.always:
                await asyncio.wait_for(self._forever.wait(), timeout=30.0)
            await self.fake.until(lambda: self.fake.running() == 0, timeout_s=30.0)
        return await handler(request)


def _status_of(r: Rig) -> tuple[bool, bool | None, float | None]:
    [status] = r.pharos.state.backends()
    return status.up, status.reachable, status.full_round_age_s


def _stream(content: str) -> dict[str, object]:
    return {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": content}]}


async def test_a_backend_silent_while_it_generates_our_reply_stays_up_and_serves_the_next(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    SilentWhileGenerating(fake)
    r = await rig(Backend(fake), state=SILENT_STATE)
    fake.hold(after_tokens=1)
    first = asyncio.create_task(r.chat(MODEL, "first", stream=True))
    await r.until(lambda: fake.running() == 1, "the first reply generating")
    await r.until(
        lambda: (_status_of(r)[2] or 0.0) > STALE_FOR_S, "the last answered round going stale"
    )

    up, reachable, _ = _status_of(r)
    view = r.view(r.urls[0], MODEL)
    assert up and reachable is True
    assert view.up
    assert view.running is None and view.waiting is None  # unknown while silent, never 0

    second = asyncio.create_task(r.chat(MODEL, "second", stream=True))
    await r.until(lambda: fake.running() == 2, "the second request sent to the silent engine")
    fake.release()
    statuses = [status for status, _ in await asyncio.gather(first, second)]
    assert statuses == [200, 200]
    await r.until_done(2)
    assert all(("upstream", "ok") in done.decisions for done in r.done)


async def test_a_backend_silent_with_nothing_in_flight_goes_down_past_the_bound(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    silent = SilentWhileGenerating(fake)
    r = await rig(Backend(fake), state=SILENT_STATE)
    silent.always = True  # hung, or busy with another client's request: nothing of ours
    await r.until(lambda: _status_of(r)[1] is False, "a round marking it down")
    await r.until(lambda: not _status_of(r)[0], "its view going stale")
    assert not r.view(r.urls[0], MODEL).up
    status, reply = await r.chat(MODEL, "no backend")
    assert status == 503, reply
