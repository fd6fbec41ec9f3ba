"""The cheapest load generator and fake engine asyncio allows, for compare.py (issue 13).

With aiohttp on both ends, the client and the fake vLLM (sharing one core) were the limit at
c=32, so the req/s ratios measured them, not the proxies. Here both are raw asyncio
Protocols: the client writes pre-encoded request bytes and only finds where each reply ends;
the fake answers from chunks FakeVLLM itself streamed once at startup (`record_replies`), one
chunk per loop turn, as an engine emitting tokens as fast as it can.

Run the fake alone: .venv/bin/python benchmarks/rawhttp.py --tokens 10,256
(prints its URL; stops when stdin closes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_proxy import chat_body  # noqa: E402

CRLF2 = b"\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"
_MAX_TOKENS = re.compile(rb'"max_tokens"\s*:\s*(\d+)')
_INCLUDE_USAGE = re.compile(rb'"include_usage"\s*:\s*true')
SCRAPED_PATHS = ("/health", "/version", "/metrics", "/v1/models")
"""What Pharos's vLLM probes read; anything else is a 404."""


# ---- the client ---------------------------------------------------------------------------


def request_bytes(host: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    ttft_s: float  # request written -> first body byte
    body_bytes: int  # as framed on the wire (chunk sizes included)


class ReplyEnd:
    """Where one HTTP/1.1 reply ends: Content-Length bytes, or the last chunk of a chunked
    body (`...\\r\\n0\\r\\n\\r\\n`, which no SSE event contains: JSON has no raw CR)."""

    __slots__ = ("body_len", "chunked", "content_length", "head", "status", "tail")

    def __init__(self) -> None:
        self.head = bytearray()  # until the blank line
        self.status = 0
        self.chunked = False
        self.content_length = -1
        self.body_len = -1  # -1: head not complete yet
        self.tail = b""  # the last bytes of the body, to find the last chunk

    def feed(self, data: bytes) -> tuple[bool, bool]:
        """(the first body bytes arrived now, the reply is complete)."""
        first_body = False
        if self.body_len < 0:
            self.head += data
            end = self.head.find(CRLF2)
            if end < 0:
                return False, False
            self._parse_head(bytes(self.head[:end]))
            data = bytes(self.head[end + 4 :])
            self.body_len = 0
            first_body = bool(data) or self.content_length == 0
        elif self.body_len == 0 and data:
            first_body = True
        self.body_len += len(data)
        if self.content_length >= 0:
            return first_body, self.body_len >= self.content_length
        if not self.chunked:
            return first_body, False  # read until close: not used by these servers
        self.tail = (self.tail + data)[-7:]
        done = self.tail.endswith(b"\r\n" + LAST_CHUNK) or (
            self.body_len == len(LAST_CHUNK) and self.tail == LAST_CHUNK
        )
        return first_body, done

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        self.status = int(lines[0].split(b" ", 2)[1])
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                self.content_length = int(value.strip())
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                self.chunked = True


class ClosedBeforeReply(ConnectionError):
    """The server closed the connection before a byte of the reply: an idle keep-alive
    connection it timed out just as the request went (uvicorn closes after 5 s)."""


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._end = ReplyEnd()
        self._sent_s = 0.0
        self._ttft_s = 0.0
        self._done: asyncio.Future[Reply] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._done is not None and not self._done.done():
            if self._end.body_len < 0 and not self._end.head:
                self._done.set_exception(ClosedBeforeReply())
            else:
                self._done.set_exception(ConnectionError(f"closed mid-reply: {exc}"))

    def data_received(self, data: bytes) -> None:
        first, done = self._end.feed(data)
        if first:
            self._ttft_s = time.perf_counter() - self._sent_s
        if done and self._done is not None:
            end = self._end
            self._done.set_result(Reply(end.status, self._ttft_s, end.body_len))
            self._done = None

    async def send(self, raw: bytes) -> Reply:
        assert self.transport is not None
        self._end = ReplyEnd()
        self._done = asyncio.get_running_loop().create_future()
        self._sent_s = time.perf_counter()
        self.transport.write(raw)
        return await self._done


class Client:
    """A keep-alive connection to one server, reopened when the server closed it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._conn: Connection | None = None

    async def send(self, raw: bytes) -> Reply:
        try:
            reply = await self._send(raw)
        except ClosedBeforeReply:  # once more, on a new connection
            self.close()
            reply = await self._send(raw)
        if reply.status != 200:
            raise SystemExit(f"{self.host}:{self.port} answered {reply.status}")
        return reply

    async def _send(self, raw: bytes) -> Reply:
        if self._conn is None or self._conn.transport is None:
            _, self._conn = await asyncio.get_running_loop().create_connection(
                Connection, self.host, self.port
            )
        return await self._conn.send(raw)

    def close(self) -> None:
        if self._conn is not None and self._conn.transport is not None:
            self._conn.transport.close()
        self._conn = None


# ---- the fake engine ----------------------------------------------------------------------


@dataclass(frozen=True)
class Replies:
    """Pre-encoded answers: (max_tokens, include_usage) -> the stream's wire chunks, and GET
    path -> the whole reply."""

    streams: dict[tuple[int, bool], list[bytes]]
    gets: dict[bytes, bytes]

    def stream_for(self, body: bytes) -> list[bytes]:
        tail = body[-256:]  # max_tokens and stream_options sit at either end of these bodies
        head = body[:256]
        found = _MAX_TOKENS.search(tail) or _MAX_TOKENS.search(body)
        tokens = int(found.group(1)) if found else min(t for t, _ in self.streams)
        usage = bool(_INCLUDE_USAGE.search(head) or _INCLUDE_USAGE.search(tail))
        chunks = self.streams.get((tokens, usage))
        if chunks is None:
            raise KeyError(f"no recorded stream for max_tokens={tokens}")
        return chunks


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def framed(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def whole(status: int, content_type: str, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status} -\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1") + body


NOT_FOUND = whole(404, "application/json", b'{"detail":"Not Found"}')


async def record_replies(tokens: Sequence[int]) -> Replies:
    """What FakeVLLM (64 slots, every reply run to max_tokens) answers, recorded once."""
    from pharos.fakeengine import FakeVLLM, no_sleep, serve
    from pharos.fakeengine.ledger import Ledger

    streams: dict[tuple[int, bool], list[bytes]] = {}
    gets: dict[bytes, bytes] = {}
    fake = FakeVLLM(ledger=Ledger(slots=64, natural_stop=False), sleep=no_sleep)
    async with serve(fake) as url, aiohttp.ClientSession() as session:
        for path in SCRAPED_PATHS:
            async with session.get(url + path) as response:
                body = await response.read()
                content_type = response.headers.get("Content-Type", "text/plain")
                gets[path.encode()] = whole(response.status, content_type, body)
        for n in tokens:
            for usage in (False, True):
                body = chat_body(0, n)
                if usage:
                    body = b'{"stream_options":{"include_usage":true},' + body[1:]
                async with session.post(url + "/v1/chat/completions", data=body) as response:
                    sse = await response.read()
                events = [e + b"\n\n" for e in sse.split(b"\n\n") if e]
                streams[(n, usage)] = [STREAM_HEAD + framed(events[0])] + [
                    framed(e) for e in events[1:]
                ]
                streams[(n, usage)][-1] += LAST_CHUNK
    return Replies(streams, gets)


class FakeServer(asyncio.Protocol):
    """Reads each request's head and Content-Length body, answers from Replies."""

    def __init__(self, replies: Replies) -> None:
        self._replies = replies
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, _exc: Exception | None) -> None:
        self._transport = None

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while True:
            end = self._buf.find(CRLF2)
            if end < 0:
                return
            head = bytes(self._buf[:end])
            length = _content_length(head)
            if len(self._buf) < end + 4 + length:
                return
            body = bytes(self._buf[end + 4 : end + 4 + length])
            del self._buf[: end + 4 + length]
            self._answer(head, body)

    def _answer(self, head: bytes, body: bytes) -> None:
        transport = self._transport
        if transport is None:
            return
        method, path = head.split(b" ", 2)[:2]
        if method == b"GET":
            transport.write(self._replies.gets.get(path.split(b"?", 1)[0], NOT_FOUND))
            return
        self._write(self._replies.stream_for(body), 0)

    def _write(self, chunks: list[bytes], index: int) -> None:
        """One chunk per loop turn."""
        if self._transport is None or self._transport.is_closing():
            return
        self._transport.write(chunks[index])
        if index + 1 < len(chunks):
            self._loop.call_soon(self._write, chunks, index + 1)


def _content_length(head: bytes) -> int:
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    end = lower.find(b"\r\n", at + 2)
    return int(lower[at + 17 : end if end >= 0 else None])


async def serve_fake(tokens: Sequence[int]) -> None:
    replies = await record_replies(tokens)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FakeServer(replies), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tokens", default="10", help="max_tokens values to record, e.g. 10,256")
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(serve_fake([int(t) for t in args.tokens.split(",")]))


if __name__ == "__main__":
    main()
