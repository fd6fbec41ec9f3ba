"""Layer 3: a pooled keep-alive connection the engine has closed is not a dead engine.

llama-server closes keep-alive connections after long requests; Pharos's pool still held
one, and the next request on it failed before any byte came back (ServerDisconnectedError).
That was taken for a refused connection: the backend was ejected. The fake here closes every
connection it is sent a second request on, without answering (what the client sees when it
reuses a connection the server closed while it sat idle in the pool).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from pharos.fakeengine import FakeLlamaCpp, no_sleep
from tests.proxy.rig import Backend, RigFactory, answer_posts

MODEL = "qwen2.5-0.5b"


class ClosesReusedConnections:
    """Answers the first request of each connection; closes it when a second one arrives."""

    def __init__(self, fake: FakeLlamaCpp) -> None:
        # The transports themselves, not their ids: a closed one's id was reused by the next
        # connection, which was then taken for a reused one.
        self.seen: set[object] = set()
        self.closed = 0
        self.posts = 0
        self.drop_all = False
        answer_posts(fake, self._post)

    async def _post(self, request: web.Request) -> web.StreamResponse | None:
        self.posts += 1
        transport = request.transport
        assert transport is not None
        if self.drop_all or transport in self.seen:
            self.closed += 1
            transport.abort()  # no status line, nothing: the connection is just gone
            raise web.HTTPServiceUnavailable()  # never written: the socket is closed
        self.seen.add(transport)
        return None


async def test_a_request_on_a_stale_pooled_connection_is_retried_on_the_same_backend(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    closer = ClosesReusedConnections(fake)
    r = await rig(Backend(fake))

    statuses = [(await r.chat(MODEL, f"turn {i}"))[0] for i in range(3)]
    await r.until_done(3)

    assert statuses == [200, 200, 200]
    assert closer.closed >= 1, "Pharos never reused a pooled connection: nothing was tested"
    assert closer.posts == 3 + closer.closed  # each dropped request was sent once more
    for done in r.done:
        assert ("upstream", "connect_failed") not in done.decisions, done.decisions
        assert done.backend_url == r.urls[0]
    [status] = r.pharos.state.backends()
    assert status.ejected is None and status.up


async def test_a_backend_that_drops_the_retry_too_is_ejected(rig: RigFactory) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    closer = ClosesReusedConnections(fake)
    r = await rig(Backend(fake))
    closer.drop_all = True  # new connections too: the engine is broken, not just pooled idle
    status, _ = await r.chat(MODEL, "dropped")
    await r.until_done(1)

    assert status == 503
    assert closer.closed == 2  # the first attempt and its one retry, then no more
    assert ("upstream", "connect_failed") in r.done[0].decisions
    [backend] = r.pharos.state.backends()
    assert backend.ejected is not None


async def test_the_retry_goes_out_on_a_new_connection_when_the_pool_holds_several_closed_ones(
    rig: RigFactory,
) -> None:
    """Found in CI under load ([200, 200, 503]): two requests at once left two idle pooled
    connections, the engine closed both, and the retry took the second one."""
    fake = FakeLlamaCpp(sleep=no_sleep)
    closer = ClosesReusedConnections(fake)
    r = await rig(Backend(fake))
    first = await asyncio.gather(r.chat(MODEL, "a"), r.chat(MODEL, "b"))
    await r.until_done(2)
    assert [status for status, _ in first] == [200, 200]
    assert len(closer.seen) == 2, "the two requests shared a connection: nothing was tested"

    status, _ = await r.chat(MODEL, "after the burst")
    await r.until_done(3)

    assert status == 200
    assert closer.closed == 1  # the stale pooled try; the retry went out on a new connection
    [backend] = r.pharos.state.backends()
    assert backend.ejected is None and backend.up
