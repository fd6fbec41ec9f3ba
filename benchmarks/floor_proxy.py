"""The floor under any Python proxy of compare.py's workload: callbacks only, no coroutine or
task per request, the reply's bytes relayed as they arrive (issue 13). Reported, never asserted.

compare.py runs it beside the bare aiohttp pass-through to show how much of a request's CPU is
the HTTP layers rather than forwarding itself. It is no proxy anyone should run: it trusts
Content-Length, keeps no bounds, and handles one request per connection at a time.

`--parse` adds Pharos's own parse (`pharos.proxy.parse.parse_request`: the msgspec decode and
the prefix chain) to each request, the compute any prefix-aware router does before it can
pick a target.

Run: .venv/bin/python benchmarks/floor_proxy.py --port N [--parse] http://upstream
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rawhttp import CRLF2, ReplyEnd  # noqa: E402

HEALTH_REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Upstream(asyncio.Protocol):
    """One kept-alive connection to the engine, lent to one client request at a time."""

    def __init__(self, idle: list[Upstream]) -> None:
        self._idle = idle
        self.client: Client | None = None
        self._end = ReplyEnd()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, client: Client, request: bytes) -> None:
        assert self.transport is not None
        self.client, self._end = client, ReplyEnd()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        client = self.client
        assert client is not None
        client.write(data)
        if self._end.feed(data)[1]:
            self.client = None
            self._idle.append(self)
            client.reply_done()


class Client(asyncio.Protocol):
    """One client connection: reads a request head and its Content-Length body, forwards it."""

    def __init__(self, forward: Callable[[Client, bytes, bytes], None]) -> None:
        self._forward = forward
        self._buffer = b""
        self._busy = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._next()

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def reply_done(self) -> None:
        self._busy = False
        self._next()

    def _next(self) -> None:
        while not self._busy:
            end = self._buffer.find(CRLF2)
            if end < 0:
                return
            lines = self._buffer[:end].split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self._buffer) < end + 4 + length:
                return
            body = self._buffer[end + 4 : end + 4 + length]
            self._buffer = self._buffer[end + 4 + length :]
            method, path, _version = lines[0].split(b" ", 2)
            if method == b"GET":
                self.write(HEALTH_REPLY)
                continue
            self._busy = True
            self._forward(self, path, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parse", action="store_true", help="Pharos's parse on every request")
    parser.add_argument("upstream")
    args = parser.parse_args()
    host, _, port = args.upstream.removeprefix("http://").rstrip("/").partition(":")
    parse: Callable[[bytes], object] | None = None
    if args.parse:
        from pharos.proxy.parse import parse_request

        def parse(body: bytes) -> object:
            return parse_request(body, route="chat")

    idle: list[Upstream] = []
    connecting: set[asyncio.Task[None]] = set()

    def forward(client: Client, path: bytes, body: bytes) -> None:
        if parse is not None:
            parse(body)
        request = b"".join(
            (
                b"POST ",
                path,
                b" HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\n",
                b"Content-Length: %d\r\n\r\n" % len(body),
                body,
            )
        )
        if idle:
            idle.pop().send(client, request)
            return
        task = asyncio.ensure_future(connect(client, request))
        connecting.add(task)
        task.add_done_callback(connecting.discard)

    async def connect(client: Client, request: bytes) -> None:
        loop = asyncio.get_running_loop()
        _, upstream = await loop.create_connection(lambda: Upstream(idle), host, int(port))
        upstream.send(client, request)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Client(forward), "127.0.0.1", args.port)
        await server.serve_forever()

    try:
        import uvloop
    except ImportError:
        asyncio.run(serve())
    else:
        uvloop.run(serve())


if __name__ == "__main__":
    main()
