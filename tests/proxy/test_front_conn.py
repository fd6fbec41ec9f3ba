"""proxy/front.FrontConnection over a recording transport: framing, pipelining, hand-off,
backpressure and the client leaving, with no sockets (the listener tests are in
test_front_listener.py)."""

from __future__ import annotations

import asyncio
import itertools
import types
from collections.abc import Awaitable, Callable
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.proxy.app import ROUTES
from pharos.proxy.bodies import BodyBudget
from pharos.proxy.errors import ClientError
from pharos.proxy.front import Front, FrontConnection
from pharos.proxy.frontreply import FrontSide
from pharos.proxy.upstream import Route

CHAT = b"/v1/chat/completions"


def request(body: bytes, rid: str, *, extra: bytes = b"") -> bytes:
    return (
        b"POST " + CHAT + b" HTTP/1.1\r\nHost: x\r\nX-Request-Id: " + rid.encode() + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body
    )


class Transport:
    """The asyncio transport calls FrontConnection makes, recorded."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.closed = False
        self.aborted = False
        self.protocol: Any = None
        self.reading = True

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.out += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def get_extra_info(self, _name: str, default: Any = None) -> Any:
        return default


class Handler(asyncio.Protocol):
    """aiohttp's handler as the hand-off sees it."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.data = b""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data


class Manager:
    def __init__(self) -> None:
        self.connections: set[FrontConnection] = set()
        self.handlers: list[Handler] = []

    def front_connected(self, conn: FrontConnection) -> None:
        self.connections.add(conn)

    def front_lost(self, conn: FrontConnection) -> None:
        self.connections.discard(conn)

    def aiohttp_handler(self) -> asyncio.Protocol:
        self.handlers.append(Handler())
        return self.handlers[-1]


ServeFn = Callable[[FrontSide, Route], Awaitable[int]]


async def echo(client: FrontSide, _route: Route) -> int:
    body = await client.read_body(1024, 5.0)
    client.reply(200, body, "text/plain")
    return 200


def connect(
    serve: ServeFn, *, budget: BodyBudget | None = None
) -> tuple[FrontConnection, Transport, Manager]:
    manager = Manager()
    front = Front(serve=serve, routes=ROUTES, access=None, budget=budget, ids=None, idle_s=30.0)
    conn = FrontConnection(front, manager, asyncio.get_running_loop())
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport, manager


async def settle() -> None:
    """Let the connection's request tasks run to their end (each step is a loop turn)."""
    for _ in range(50):
        await asyncio.sleep(0)


def without_dates(out: bytes) -> bytes:
    return b"\r\n".join(line for line in out.split(b"\r\n") if not line.startswith(b"Date: "))


PIPELINED = request(b"first", "a1") + request(b"", "a2") + request(b"x" * 300, "a3")


def replies_for(reads: list[bytes]) -> bytes:
    async def scenario() -> bytes:
        conn, transport, manager = connect(echo)
        for data in reads:
            conn.data_received(data)
            await settle()
        assert not manager.handlers  # nothing was handed to aiohttp
        assert not transport.closed
        return without_dates(bytes(transport.out))

    return asyncio.run(scenario())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(PIPELINED) - 1), unique=True, max_size=12))
def test_any_split_of_pipelined_requests_gets_the_same_replies_in_order(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(PIPELINED)]
    reads = [PIPELINED[a:b] for a, b in itertools.pairwise(points)]
    out = replies_for(reads)
    assert out == replies_for([PIPELINED])
    assert out.count(b"HTTP/1.1 200 OK") == 3
    assert (
        out.index(b"X-Request-Id: a1")
        < out.index(b"X-Request-Id: a2")
        < out.index(b"X-Request-Id: a3")
    )
    assert out.endswith(b"\r\n\r\n" + b"x" * 300)


async def test_a_stream_is_chunked_as_aiohttp_frames_it_and_the_connection_kept() -> None:
    async def stream(client: FrontSide, _route: Route) -> int:
        await client.read_body(1024, 5.0)
        client.start(200, "text/event-stream")
        await client.write(b"data: 1\n\n")
        await client.write_eof(b"data: [DONE]\n\n")
        return 200

    conn, transport, _ = connect(stream)
    conn.data_received(request(b"{}", "s1"))
    await settle()
    out = without_dates(bytes(transport.out))
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 200 OK",
        b"Content-Type: text/event-stream",
        b"Transfer-Encoding: chunked",
        b"X-Request-Id: s1",
        b"Server: Python/3.11 aiohttp/3.14.5",
    ]
    assert body == b"9\r\ndata: 1\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
    assert not transport.closed


async def test_a_get_is_handed_to_aiohttp_with_every_byte_read() -> None:
    conn, transport, manager = connect(echo)
    conn.data_received(b"GET /status HT")  # a GET is aiohttp's before its head is whole
    (handler,) = manager.handlers
    assert handler.data == b"GET /status HT"
    assert transport.protocol is handler and handler.transport is transport
    assert conn not in manager.connections


async def test_a_request_after_a_served_one_is_handed_off_whole() -> None:
    conn, transport, manager = connect(echo)
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    conn.data_received(request(b"one", "h1") + chunked + b"3\r\nabc\r\n")
    await settle()
    assert b"X-Request-Id: h1" in transport.out and transport.out.endswith(b"one")
    (handler,) = manager.handlers
    assert handler.data == chunked + b"3\r\nabc\r\n"


async def test_an_unread_body_is_skipped_and_the_next_request_served() -> None:
    async def refuse_first(client: FrontSide, route: Route) -> int:
        if client.request_id() == "r1":  # a 401: answered before the body is read
            client.error(ClientError(401, "no key", "invalid_request_error", "invalid_api_key"))
            return 401
        return await echo(client, route)

    conn, transport, manager = connect(refuse_first)
    conn.data_received(request(b"unread", "r1") + request(b"read", "r2"))
    await settle()
    out = bytes(transport.out)
    assert out.startswith(b"HTTP/1.1 401 Unauthorized\r\n")
    assert out.endswith(b"\r\n\r\nread") and not manager.handlers and not transport.closed


async def test_a_body_past_the_budget_is_a_503_and_the_connection_closed() -> None:
    async def reads(client: FrontSide, _route: Route) -> int:
        try:
            await client.read_body(1 << 20, 5.0)
        except ClientError as err:
            client.error(err)
            return err.status
        return 200

    budget = BodyBudget(100)
    conn, transport, _ = connect(reads, budget=budget)
    conn.data_received(request(b"y" * 101, "b1"))
    await settle()
    assert transport.out.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Retry-After: 1\r\n" in transport.out and b"Connection: close\r\n" in transport.out
    assert transport.closed and budget.held_bytes == 0


async def test_the_client_leaving_cancels_the_request() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def waits(client: FrontSide, _route: Route) -> int:
        await client.read_body(1024, 5.0)
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 200

    conn, _, manager = connect(waits)
    conn.data_received(request(b"{}", "c1"))
    await asyncio.wait_for(started.wait(), 5.0)
    conn.connection_lost(None)
    await asyncio.wait_for(cancelled.wait(), 5.0)
    assert conn not in manager.connections


async def test_a_slow_reader_holds_the_writer_until_it_drains() -> None:
    wrote_second = asyncio.Event()

    async def two_writes(client: FrontSide, _route: Route) -> int:
        await client.read_body(1024, 5.0)
        client.start(200, None)
        await client.write(b"a")
        wrote_second.set()
        await client.write_eof(b"b")
        return 200

    conn, transport, _ = connect(two_writes)
    conn.pause_writing()
    conn.data_received(request(b"{}", "w1"))
    await settle()
    assert not wrote_second.is_set()  # the first write waits for the transport to drain
    conn.resume_writing()
    await settle()
    assert wrote_second.is_set() and transport.out.endswith(b"1\r\nb\r\n0\r\n\r\n")


class IdleClock:
    """The loop calls the idle timer makes, on a clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any) -> Any:
        self.timers.append((when, callback))
        return types.SimpleNamespace(cancel=lambda: None)


def test_one_idle_timer_counts_from_the_last_reply_of_a_kept_alive_connection() -> None:
    """One idle timer a connection (not a cancel and a new one a request): when it fires it
    moves on to the bound from the last reply, never closes a connection serving a request,
    and closes one idle for idle_s (30 s here)."""
    clock = IdleClock()
    front = Front(serve=echo, routes=ROUTES, access=None, budget=None, ids=None, idle_s=30.0)
    conn = FrontConnection(front, Manager(), clock)  # type: ignore[arg-type]
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    assert [when for when, _ in clock.timers] == [30.0]
    clock.now = 10.0
    conn._task = cast(Any, object())  # a request is served from 10 s to 12 s
    clock.now = 12.0
    conn._task = None
    conn._arm_idle()
    assert len(clock.timers) == 1  # the pending timer serves this idle spell too
    clock.now = 30.0
    clock.timers[-1][1]()
    assert not transport.closed and clock.timers[-1][0] == 42.0  # moved on to 12 + 30
    conn._task = cast(Any, object())  # serving again when it fires: not closed, not re-armed
    clock.now = 42.0
    clock.timers[-1][1]()
    assert not transport.closed and len(clock.timers) == 2
    conn._task = None
    conn._arm_idle()  # the reply is out at 42 s: a timer for 72 s
    clock.now = 72.0
    clock.timers[-1][1]()
    assert transport.closed
