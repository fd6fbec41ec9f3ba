"""One HTTP/1.1 connection to an engine on an asyncio Protocol: the proxy's upstream client.

aiohttp's ClientSession cost ~120-270 µs of CPU per proxied 32 KiB chat more than a raw
Protocol client (c=1, 10-token streams: ClientRequest, the connector, a client middleware,
its timers, StreamReader per chunk). This one writes the request in one call and parses
the reply itself: a status line and headers found with one `find`, bodies by
Content-Length, chunked, or to the connection's end. Every broken reply is one of the
errors in wirehead.py, never a parser's traceback; a connection goes back to the pool only when its
reply was read to its end and both sides keep it alive.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import cast

from pharos.proxy.stream_scan import complete_chunks
from pharos.proxy.wirehead import (
    CHUNKED,
    LENGTH,
    MAX_HEAD_BYTES,
    NO_BODY,
    TO_CLOSE,
    BadReply,
    ClosedBeforeReply,
    ConnectFailed,
    HeadCache,
    ReadTimeout,
    ReplyCut,
    WireError,
)

__all__ = [
    "MAX_HEAD_BYTES",
    "BadReply",
    "ClosedBeforeReply",
    "ConnectFailed",
    "Connection",
    "ReadTimeout",
    "ReplyCut",
    "WireError",
]

MAX_CHUNK_LINE_BYTES = 4096
MAX_REFUSAL_BYTES = 8 * 1024 * 1024
"""A 5xx or 404 body is read whole to pass it on; past this it is a broken reply."""
PAUSE_BYTES = 256 * 1024
"""Unread reply bytes held before reading from the engine pauses (a slow client)."""

_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"
_HEX_DIGITS = b"0123456789abcdefABCDEF"


def _extended_size(line: bytes) -> int:
    """A chunk size line with an extension or padding (`1a;name=value`), or -1."""
    size_text = line.split(b";", 1)[0].strip(b" \t")
    if not size_text or len(size_text) > 15 or size_text.translate(None, _HEX_DIGITS):
        return -1
    return int(size_text, 16)


class Connection(asyncio.Protocol):
    """One keep-alive connection, one exchange at a time (state: the parse of the reply)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, origin: str, heads: HeadCache | None = None
    ) -> None:
        """`heads`: the client's cache of parsed reply heads (its own when None)."""
        self.origin = origin
        self._heads = HeadCache() if heads is None else heads
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self.idle_since_s = 0.0
        self._loop = loop
        self._head = bytearray()
        self._head_done = False
        self._got_bytes = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self.keep_alive = True
        self._mode = NO_BODY
        self._left = 0  # LENGTH: body bytes to come; CHUNKED: bytes of the current chunk
        self._chunk_state = 0  # 0: size line, 1: data, 2: CRLF after data, 3: trailers
        self._pending = b""  # CHUNKED: an incomplete size line or CRLF
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._paused = False
        self.complete = False
        self._error: WireError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._idle_s = 0.0
        self._last_data_s = 0.0

    # ---- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def connection_lost(self, _exc: Exception | None) -> None:
        self.transport = None
        if self.complete:
            return
        if not self._head_done:
            if self._got_bytes:
                self._fail(BadReply("the connection closed inside the reply's head"))
            else:
                self._fail(ClosedBeforeReply("the connection closed before the reply"))
        elif self._mode == TO_CLOSE:
            self._finish()
        else:
            self._fail(ReplyCut("the connection closed before the reply's end"))

    def data_received(self, data: bytes) -> None:
        self._last_data_s = self._loop.time()
        if self._error is not None or self.complete:
            self.keep_alive = False  # bytes nobody asked for: never reuse this connection
            return
        self._got_bytes = True
        if not self._head_done:
            self._head += data
            end = self._head.find(_HEAD_END)
            if end < 0:
                if len(self._head) > MAX_HEAD_BYTES:
                    self._fail(BadReply(f"the reply's head passed {MAX_HEAD_BYTES} bytes"))
                return
            if end > MAX_HEAD_BYTES:
                self._fail(BadReply(f"the reply's head passed {MAX_HEAD_BYTES} bytes"))
                return
            rest = bytes(self._head[end + 4 :])
            head = bytes(self._head[:end])
            self._head.clear()
            try:
                parsed = self._heads.parse(head)
            except BadReply as exc:
                self._fail(exc)
                return
            self.status, self.headers = parsed.status, dict(parsed.headers)
            self.keep_alive, self._mode, self._left = parsed.keep_alive, parsed.mode, parsed.length
            if 100 <= self.status < 200:  # an interim reply: the real head follows
                self._head_done = False
                if rest:
                    self.data_received(rest)
                return
            self._head_done = True
            if self._mode == NO_BODY or (self._mode == LENGTH and self._left == 0):
                if rest:
                    self.keep_alive = False
                self._finish()
                return
            if not rest:
                self._wake()
                return
            data = rest
        if self._mode == CHUNKED:
            self._chunked(data)
        elif self._mode == LENGTH:
            if len(data) >= self._left:
                if len(data) > self._left:
                    self.keep_alive = False
                    data = data[: self._left]
                self._left = 0
                self._push(data)
                self._finish()
                return
            self._left -= len(data)
            self._push(data)
        else:
            self._push(data)

    # ---- the reply's head ---------------------------------------------------------------

    # ---- chunked bodies -----------------------------------------------------------------

    def _chunked(self, data: bytes) -> None:
        if self._pending:
            data = self._pending + data
            self._pending = b""
        pos, end = 0, len(data)
        pieces: list[bytes] = []
        while pos < end:
            state = self._chunk_state
            if state == 0 and complete_chunks is not None:
                # every complete plain chunk from here in one C call; the loop below reads what
                # it stopped at (13 chunks a 10-token reply: ~0.7 us each in this loop)
                payload, pos = complete_chunks(data, pos)
                if payload:
                    pieces.append(payload)
                if pos >= end:
                    break
            if state == 1:
                take = min(self._left, end - pos)
                pieces.append(data[pos : pos + take])
                pos += take
                self._left -= take
                if self._left == 0:
                    self._chunk_state = 2
                continue
            line_end = data.find(_CRLF, pos)
            if line_end < 0:
                if end - pos > MAX_CHUNK_LINE_BYTES:
                    self._push_all(pieces)
                    self._fail(ReplyCut("a chunk size line passed its bound"))
                    return
                self._pending = data[pos:]
                break
            line = data[pos:line_end]
            pos = line_end + 2
            if state == 2:
                if line:
                    self._push_all(pieces)
                    self._fail(ReplyCut("a chunk is longer than its size line said"))
                    return
                self._chunk_state = 0
            elif state == 0:
                if 0 < len(line) <= 8 and not line.translate(None, _HEX_DIGITS):
                    size = int(line, 16)
                else:
                    size = _extended_size(line)
                    if size < 0:
                        self._push_all(pieces)
                        self._fail(ReplyCut("a chunk size line is not hexadecimal"))
                        return
                if size == 0:
                    self._chunk_state = 3
                    continue
                stop = pos + size
                if stop + 2 <= end:  # the whole chunk and its CRLF in this read: the usual case
                    if data[stop : stop + 2] != _CRLF:
                        self._push_all(pieces)
                        self._fail(ReplyCut("a chunk is longer than its size line said"))
                        return
                    pieces.append(data[pos:stop])
                    pos = stop + 2
                    continue
                self._left = size
                self._chunk_state = 1
            elif not line:  # state 3: the blank line after the trailers
                if pos < end:
                    self.keep_alive = False
                self._push_all(pieces)
                self._finish()
                return
        self._push_all(pieces)

    # ---- the consumer's side ------------------------------------------------------------

    def _push_all(self, pieces: list[bytes]) -> None:
        if pieces:
            self._push(pieces[0] if len(pieces) == 1 else b"".join(pieces))

    def _push(self, data: bytes) -> None:
        if not data:
            return
        self._queue.append(data)
        self._queued_bytes += len(data)
        if self._queued_bytes > PAUSE_BYTES and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def _finish(self) -> None:
        self.complete = True
        self._wake()  # the idle timer stays: see _wait

    def _fail(self, error: WireError) -> None:
        if self._error is None:
            self._error = error
        self.keep_alive = False
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def send(self, head: bytes, body: bytes, idle_s: float) -> None:
        """Start one exchange: the request goes out in one write."""
        self._idle_s = idle_s
        self._head_done = False
        self._got_bytes = False
        self.complete = False
        self._mode = NO_BODY
        self.status = 0
        self._last_data_s = self._loop.time()
        transport = self.transport
        if transport is None:
            raise ClosedBeforeReply("the pooled connection had closed")
        transport.writelines((head, body))

    async def wait_head(self) -> None:
        """Until the reply's head; a body that broke in the same read is the body's error."""
        while not self._head_done and not self.complete:
            await self._wait()
            if self._error is not None and not self._head_done:
                raise self._error

    def take(self) -> bytes:
        """What has arrived of the body and nobody read yet (b"" when nothing)."""
        queue = self._queue
        if not queue:
            if self._error is not None and self._head_done:
                raise self._error
            return b""
        data = queue.popleft() if len(queue) == 1 else b"".join(queue)
        queue.clear()
        self._queued_bytes = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def loop_time(self) -> float:
        """The loop's clock, from the loop this connection runs on: CPython's
        asyncio.get_running_loop() makes a getpid syscall a call (strace: 3.2 a request at
        c=32 before; the pool asked twice a request)."""
        return self._loop.time()

    def ended(self) -> bool:
        """The reply arrived whole and every byte of its body was taken."""
        return self.complete and not self._queue

    async def next_chunk(self) -> bytes:
        """The next body bytes, b"" at the reply's end; raises ReplyCut or ReadTimeout."""
        while True:
            data = self.take()
            if data:
                return data
            if self.complete:
                return b""
            await self._wait()

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        loop = self._loop
        waiter = loop.create_future()
        self._waiter = waiter
        due = self._last_data_s + self._idle_s
        timer = self._timer
        if timer is None or timer.when() > due:
            # A timer left from an earlier exchange that fires before `due` moves on to it
            # (_check_idle); one due later (a longer idle bound then) is replaced.
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(due, self._check_idle)
        try:
            await waiter
        finally:
            self._waiter = None

    def _check_idle(self) -> None:
        """The idle bound counts from the last byte received. One timer serves every wait of
        an exchange, and of the next ones on this connection: when it fires early it moves on
        to the last byte's bound, and it ends when nobody waits (a timer per wait cost a create
        and a cancel per chunk; one per exchange a call_at and a cancel, ~2.7 us, a request)."""
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        due = self._last_data_s + self._idle_s
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check_idle)
            return
        self.keep_alive = False
        waiter.set_exception(ReadTimeout(f"nothing from the engine for {self._idle_s:g}s"))

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def reusable(self) -> bool:
        return (
            self.complete
            and self.keep_alive
            and self._error is None
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def reset(self) -> None:
        """Ready for the next exchange on this connection (its idle timer may still run)."""
        self.headers = {}
        self._queue.clear()
        self._queued_bytes = 0
        self._chunk_state = 0
        self._pending = b""
        self._left = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        self.keep_alive = False
        self._stop_timer()
        if self.transport is not None:
            self.transport.abort()
            self.transport = None
