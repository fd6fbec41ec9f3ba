"""proxy/wire.py's reply parser on its own: however the engine's bytes are split into reads,
the body comes out the same, and every broken framing is one clear error."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.proxy.wire import (
    MAX_HEAD_BYTES,
    BadReply,
    ClosedBeforeReply,
    Connection,
    ReadTimeout,
    ReplyCut,
    WireError,
)
from pharos.proxy.wirehead import HeadCache, parse_head

EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'


class Transport:
    """What Connection calls on its transport; records aborts and pauses."""

    def __init__(self) -> None:
        self.aborted = False
        self.paused = False
        self.written: list[bytes] = []

    def is_closing(self) -> bool:
        return self.aborted

    def writelines(self, parts: tuple[bytes, ...]) -> None:
        self.written.append(b"".join(parts))

    def abort(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def connection(loop: asyncio.AbstractEventLoop) -> tuple[Connection, Transport]:
    conn = Connection(loop, "http://engine")
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.send(b"POST / HTTP/1.1\r\n\r\n", b"{}", 60.0)
    return conn, transport


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def drain(conn: Connection) -> bytes:
    out = bytearray()
    while piece := conn.take():
        out += piece
    return bytes(out)


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    return [raw[a:b] for a, b in itertools.pairwise(points) if b > a]


CHUNKED_REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + chunked(EVENT, EVENT * 3, b"x" * 300, EVENT)
)
LENGTH_REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world"


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (CHUNKED_REPLY, EVENT + EVENT * 3 + b"x" * 300 + EVENT),
        (LENGTH_REPLY, b"hello world"),
    ],
    ids=["chunked", "content-length"],
)
def test_any_split_of_the_reply_into_reads_gives_the_same_body(
    raw: bytes, body: bytes, cuts: list[int]
) -> None:
    loop = asyncio.new_event_loop()
    try:
        conn, _ = connection(loop)
        got = bytearray()
        for read in split(raw, cuts):
            conn.data_received(read)
            got += drain(conn)
        assert conn.complete
        assert conn.status == 200
        assert bytes(got) == body
        assert conn.reusable()
    finally:
        loop.close()


# raw reply bytes                                                          error
BROKEN = [
    (b"HTTP/2 200 OK\r\n\r\n", BadReply),
    (b"HTTP/1.1 20 OK\r\n\r\n", BadReply),
    (b"HTTP/1.1 2000 OK\r\n\r\n", BadReply),
    (b"HTTP/1.1 200 OK\r\n bad: fold\r\n\r\n", BadReply),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", BadReply),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", BadReply),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD_BYTES, BadReply),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n", ReplyCut),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n", ReplyCut),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 5000, ReplyCut),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", ReplyCut),
]


@pytest.mark.parametrize(("raw", "error"), BROKEN)
async def test_broken_framing_is_one_clear_error_and_the_connection_is_dropped(
    raw: bytes, error: type[WireError]
) -> None:
    conn, transport = connection(asyncio.get_running_loop())
    conn.data_received(raw)
    with pytest.raises(error):
        await conn.wait_head()
        while await conn.next_chunk():
            pass
    assert transport.aborted
    assert not conn.reusable()


async def test_a_chunk_extension_is_read_past() -> None:
    conn, _ = connection(asyncio.get_running_loop())
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n")
    conn.data_received(b"0\r\nTrailer: t\r\n\r\n")
    assert drain(conn) == b"hello"
    assert conn.complete and conn.reusable()


# how the reply ends                                             reusable
REUSE = [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra", False),
    (b"HTTP/1.1 204 No Content\r\n\r\n", True),
]


@pytest.mark.parametrize(("raw", "reusable"), REUSE)
async def test_a_connection_is_reused_only_when_both_sides_keep_it_and_nothing_is_left(
    raw: bytes, reusable: bool
) -> None:
    conn, _ = connection(asyncio.get_running_loop())
    conn.data_received(raw)
    await conn.wait_head()
    while await conn.next_chunk():
        pass
    assert conn.reusable() is reusable


async def test_a_body_read_to_the_close_ends_there_and_is_never_reused() -> None:
    conn, _ = connection(asyncio.get_running_loop())
    conn.data_received(b"HTTP/1.1 200 OK\r\n\r\npart one, ")
    await conn.wait_head()
    assert await conn.next_chunk() == b"part one, "
    conn.data_received(b"part two")
    conn.connection_lost(None)
    assert await conn.next_chunk() == b"part two"
    assert await conn.next_chunk() == b""
    assert not conn.reusable()


async def test_closed_before_any_byte_is_its_own_error() -> None:
    conn, _ = connection(asyncio.get_running_loop())
    conn.connection_lost(None)
    with pytest.raises(ClosedBeforeReply):
        await conn.wait_head()


async def test_a_silent_engine_times_out_after_the_idle_bound_from_its_last_byte() -> None:
    loop = asyncio.get_running_loop()
    conn = Connection(loop, "http://engine")
    conn.connection_made(Transport())  # type: ignore[arg-type]
    conn.send(b"", b"", 0.05)
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    await conn.wait_head()
    started = loop.time()
    with pytest.raises(ReadTimeout):
        await conn.next_chunk()
    assert loop.time() - started >= 0.04
    assert not conn.reusable()


async def test_reading_pauses_while_the_client_lags_and_resumes_when_it_reads() -> None:
    conn, transport = connection(asyncio.get_running_loop())
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 600000\r\n\r\n")
    conn.data_received(b"a" * 300_000)
    assert transport.paused
    assert len(conn.take()) == 300_000
    assert not transport.paused


def test_the_reply_head_cache_answers_what_parse_head_answers() -> None:
    cache = HeadCache()
    good = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked",
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close",
        b"HTTP/1.0 503 -\r\nContent-Length: 2",
    ]
    for head in good * 2:
        assert cache.parse(head) == parse_head(head)
    for bad in (b"HTTP/2 200 OK", b"HTTP/1.1 200 OK\r\nContent-Length: x") * 2:
        with pytest.raises(BadReply):
            cache.parse(bad)
    for n in range(HeadCache.MAX_HEADS * 2):
        cache.parse(b"HTTP/1.1 200 OK\r\nContent-Length: %d" % n)
    assert len(cache._heads) <= HeadCache.MAX_HEADS


async def test_a_connection_s_headers_are_its_own_copy() -> None:
    loop = asyncio.get_running_loop()
    heads = HeadCache()
    first, _ = connection(loop)
    first._heads = heads
    first.data_received(LENGTH_REPLY)
    first.headers["x-written"] = "1"
    second, _ = connection(loop)
    second._heads = heads
    second.data_received(LENGTH_REPLY)
    assert "x-written" not in second.headers


async def test_the_idle_bound_of_a_reused_connection_s_next_exchange_holds() -> None:
    """The idle timer outlives an exchange (one timer a connection, not one an exchange): a
    next exchange with a shorter bound still times out at its own bound, not the first's."""
    loop = asyncio.get_running_loop()
    conn = Connection(loop, "http://engine")
    conn.connection_made(Transport())  # type: ignore[arg-type]
    conn.send(b"", b"", 3600.0)
    loop.call_soon(conn.data_received, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    await conn.wait_head()  # waited: the connection's timer is armed for an hour
    assert conn._timer is not None
    conn.data_received(b"2\r\nab\r\n0\r\n\r\n")
    assert await conn.next_chunk() == b"ab"
    assert await conn.next_chunk() == b""
    assert conn.reusable()
    conn.reset()
    conn.send(b"", b"", 0.05)
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    await conn.wait_head()
    started = loop.time()
    with pytest.raises(ReadTimeout):
        await asyncio.wait_for(conn.next_chunk(), 5.0)
    assert 0.04 <= loop.time() - started < 1.0
    conn.close()
