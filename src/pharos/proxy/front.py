"""Pharos's own HTTP/1.1 server side for the plain inference request; aiohttp for the rest.

The public listener makes a `FrontConnection` per client connection. It reads request heads
itself (proxy/fronthead.py) and serves the plain case, `POST <inference route> HTTP/1.1`
with a Content-Length body, straight into `Proxy.serve` (one task per request), with no
aiohttp request, response, router, middleware or stream writer in between. Anything else
(another route or method, chunked bodies, Expect, Upgrade, HTTP/1.0, a malformed or
oversized head) hands the connection to aiohttp as it stands: the handler the listener would
have made gets the transport and every byte buffered so far, so those requests keep exactly
today's behavior.

Why: at c=32 with 10-token replies Pharos spent 0.58-0.62 ms CPU a request against a bare
aiohttp pass-through's 0.32-0.34; aiohttp's server pieces were ~10% of py-spy's samples.

What aiohttp's path guaranteed holds here too: the idle bound (no complete head for
`idle_s`, fresh or kept alive: closed), the connection cap (a front connection is counted in
the server's table), the body bounds (`Proxy.serve` reads the body through `FrontSide`), the
client leaving cancels its handler (handler_cancellation), pipelined requests answered in
order, backpressure (`pause_writing` holds the writer), and the drain (`close`, `shutdown`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, cast

from aiohttp.tcp_helpers import tcp_keepalive

from pharos.proxy.bodies import BodyBudget
from pharos.proxy.fronthead import HEAD_END, MAX_HEAD_BYTES, HeadCache
from pharos.proxy.frontreply import DateLine, FrontSide
from pharos.proxy.request_id import RequestIds, request_id_from
from pharos.proxy.upstream import Route

READ_AHEAD_BYTES = 256 * 1024
"""Bytes past the current request (pipelined ones) read before reading pauses."""


Serve = Callable[[FrontSide, Route], Awaitable[int]]
"""`Proxy.serve`: one request, its reply sent through the side; returns the status."""


class AccessSink(Protocol):
    """`obs.access.AccessLog`'s side for requests outside aiohttp (obs is above proxy)."""

    def begin(self) -> object: ...

    def served(
        self, slot: object, method: str, path: str, status: int, started_s: float, request_id: str
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Front:
    """What every front connection shares; built once in cmd/runtime."""

    serve: Serve
    routes: dict[str, Route]
    access: AccessSink | None
    budget: BodyBudget | None
    ids: RequestIds | None
    idle_s: float
    date_line: DateLine = field(default_factory=DateLine)
    heads: HeadCache = field(default_factory=HeadCache)


class Manager(Protocol):
    """The listener's server (proxy/listener._GuardedServer): its connection table and the
    aiohttp handler a connection is handed to."""

    def front_connected(self, conn: FrontConnection) -> None: ...

    def front_lost(self, conn: FrontConnection) -> None: ...

    def aiohttp_handler(self) -> asyncio.Protocol: ...


class FrontConnection(asyncio.Protocol):
    """One client connection (state: its read buffer, the request being served)."""

    def __init__(self, front: Front, manager: Manager, loop: asyncio.AbstractEventLoop) -> None:
        self.front = front
        self._manager = manager
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._idle_from = 0.0  # loop time the connection last went idle (see _arm_idle)
        self._body_wait: asyncio.Future[None] | None = None
        self._body_need = 0  # bytes of the current body still to read (pauses reading past it)
        self._body_left = 0  # the current body's bytes not taken by the handler
        self._drain: asyncio.Future[None] | None = None
        self._paused_writing = False
        self._paused_reading = False
        self._closing = False  # the drain asked: close once the current reply is out

    # ---- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        tcp_keepalive(self.transport)  # as aiohttp's handler does (TCP_NODELAY is the loop's)
        self._manager.front_connected(self)
        self._arm_idle()

    def connection_lost(self, _exc: Exception | None) -> None:
        self.transport = None
        self._manager.front_lost(self)
        if self._idle is not None:
            self._idle.cancel()
        for waiter in (self._body_wait, self._drain):
            if waiter is not None and not waiter.done():
                waiter.set_exception(ConnectionResetError("the client left"))
        if self._task is not None and not self._task.done():
            self._task.cancel()  # aiohttp's handler_cancellation: the lease goes CLIENT_LEFT

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        waiter = self._body_wait
        if waiter is not None:
            if len(self._buffer) >= self._body_need and not waiter.done():
                waiter.set_result(None)
        elif self._task is None:
            self._next()
        if len(self._buffer) > self._body_need + READ_AHEAD_BYTES and self.transport is not None:
            self._paused_reading = True
            self.transport.pause_reading()

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    # ---- requests -----------------------------------------------------------------------

    def _next(self) -> None:
        """Serve the next request in the buffer, or wait for it, or hand off to aiohttp."""
        buffer = self._buffer
        end = buffer.find(HEAD_END)
        if end < 0:
            if len(buffer) > MAX_HEAD_BYTES or not b"POST ".startswith(buffer[:5]):
                self._hand_off()  # a GET, an HTTP/2 preface...: aiohttp's from the first byte
            return
        head = self.front.heads.parse(bytes(buffer[:end]), self.front.routes)
        if head is None:
            self._hand_off()
            return
        del buffer[: end + 4]
        front = self.front
        side = FrontSide(
            self,
            head,
            request_id_from(head.get("X-Request-Id"), front.ids),
            None if front.budget is None else front.budget.new_hold(),
            front.date_line,
        )
        self._body_need = self._body_left = head.content_length
        self._task = self._loop.create_task(self._run(side, front.routes[head.path]))

    async def _run(self, side: FrontSide, route: Route) -> None:
        access = self.front.access
        slot = None if access is None else access.begin()
        started_s = time.monotonic()
        status = 499
        try:
            status = await self.front.serve(side, route)
        finally:
            side.release()
            if access is not None:
                access.served(slot, "POST", side.path, status, started_s, side.request_id())
            self._task = None
            self._finished(side)

    def _finished(self, side: FrontSide) -> None:
        """After a reply: close, or skip the unread body (a 401) and serve what is next."""
        self._body_need = 0
        transport = self.transport
        if transport is None:
            return
        left, self._body_left = self._body_left, 0
        if left and len(self._buffer) >= left:
            del self._buffer[:left]
            left = 0
        if left or not (side.done and side.keep_alive) or self._closing:
            transport.close()
            return
        if self._paused_reading:
            self._paused_reading = False
            transport.resume_reading()
        self._arm_idle()
        if self._buffer:
            self._next()

    async def body(self, size: int, timeout_s: float) -> bytes:
        """`size` body bytes from the buffer, waiting at most timeout_s for them."""
        if len(self._buffer) < size:
            self._body_wait = self._loop.create_future()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._body_wait
            finally:
                self._body_wait = None
        buffer = self._buffer
        if len(buffer) == size:  # the usual case: one copy, not a slice's two
            body = bytes(buffer)
            buffer.clear()
        else:
            with memoryview(buffer) as view:
                body = bytes(view[:size])
            del buffer[:size]
        self._body_need = self._body_left = 0
        return body

    # ---- writing ------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client left")
        transport.write(data)
        if self._paused_writing:
            self._drain = self._loop.create_future()
            try:
                await self._drain
            finally:
                self._drain = None

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # ---- bounds, hand-off and the drain -------------------------------------------------

    def _arm_idle(self) -> None:
        """The connection goes idle now. One timer a connection, not one a request (a cancel
        when a head came and a call_later when its reply was out: ~1.5 us a request)."""
        self._idle_from = self._loop.time()
        if self._idle is None:
            self._idle = self._loop.call_at(self._idle_from + self.front.idle_s, self._idle_passed)

    def _idle_passed(self) -> None:
        """No complete request head for idle_s (a fresh, slow or kept-alive connection). A
        request being served has the timer armed again when its reply is out (_arm_idle); one
        that went idle since the timer was set moves it to its own bound."""
        self._idle = None
        if self._task is not None or self.transport is None:
            return
        due = self._idle_from + self.front.idle_s
        if self._loop.time() < due:
            self._idle = self._loop.call_at(due, self._idle_passed)
            return
        self.transport.close()

    def _hand_off(self) -> None:
        """From now on the connection is aiohttp's, with every byte read so far."""
        transport = self.transport
        assert transport is not None and self._task is None
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._manager.front_lost(self)
        handler = self._manager.aiohttp_handler()
        transport.set_protocol(handler)
        self.transport = None
        handler.connection_made(transport)
        if self._paused_reading:
            transport.resume_reading()
        buffered, self._buffer = bytes(self._buffer), bytearray()
        handler.data_received(buffered)

    def close(self) -> None:
        """The drain: close now when idle, else once the current reply is out."""
        self._closing = True
        if self._task is None and self.transport is not None:
            self.transport.close()

    async def shutdown(self, timeout_s: float | None) -> None:
        """Wait up to timeout_s for the request in flight, then cancel it and close."""
        self._closing = True
        task = self._task
        if task is not None:
            await asyncio.wait((task,), timeout=timeout_s)
            if not task.done():
                task.cancel()
                await asyncio.wait((task,))
        if self.transport is not None:
            self.transport.close()


__all__ = ["AccessSink", "Front", "FrontConnection", "FrontSide", "Manager", "Serve"]
