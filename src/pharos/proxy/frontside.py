"""The client's side of one inference request, as the pipeline (`Proxy.serve`, `Forwarder`)
sees it, and its aiohttp implementation.

Two implementations: `AiohttpSide` (aiohttp's web server: the test clients, and every
connection the front hands to aiohttp) and `proxy.front.FrontSide` (Pharos's own HTTP/1.1
server side). The pipeline reads the request's path and headers, reads the body, then
either sends one whole reply (an error, an engine's refusal) or streams one: `start`, then
`write`s, then `write_eof`; `cut` aborts the connection without the stream's end, so a
truncated reply is never passed off as complete. A write to a client that left raises
ConnectionError.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from aiohttp import web

from pharos.proxy.bodies import read_body
from pharos.proxy.errors import ClientError, error_response_for
from pharos.proxy.request_id import RequestIds, request_id_of
from pharos.proxy.upstream import ReplyHead


class ClientSide(Protocol):
    """What the inference pipeline needs of the client's side of one request."""

    @property
    def path(self) -> str: ...

    @property
    def path_qs(self) -> str: ...

    def header(self, name: str) -> str | None:
        """The first value of a request header, the name matched without case."""
        ...

    def header_pairs(self) -> Iterable[tuple[str, str]]: ...

    def request_id(self) -> str: ...

    async def read_body(self, max_bytes: int, timeout_s: float) -> bytes:
        """The whole body, or ClientError (413, 408, 503 past the body budget)."""
        ...

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        """One whole reply with a Content-Length."""
        ...

    def error(self, err: ClientError) -> None:
        """`err` as one whole reply in the shape of the path's API."""
        ...

    def start(self, status: int, content_type: str | None) -> None:
        """A streamed reply: its head leaves with the first write."""
        ...

    async def write(self, data: bytes) -> None: ...

    async def write_eof(self, data: bytes) -> None: ...

    def cut(self) -> None: ...


class AiohttpSide:
    """ClientSide over aiohttp's web.Request; `response` is what the handler returns."""

    __slots__ = ("_ids", "_request", "_stream", "response")

    def __init__(self, request: web.Request, ids: RequestIds | None = None) -> None:
        self._request = request
        self._ids = ids
        self._stream: ReplyHead | None = None
        self.response: web.StreamResponse | None = None

    @property
    def path(self) -> str:
        return self._request.path

    @property
    def path_qs(self) -> str:
        return self._request.path_qs

    def header(self, name: str) -> str | None:
        return self._request.headers.get(name)

    def header_pairs(self) -> Iterable[tuple[str, str]]:
        return self._request.headers.items()

    def request_id(self) -> str:
        return request_id_of(self._request, self._ids)

    async def read_body(self, max_bytes: int, timeout_s: float) -> bytes:
        return await read_body(self._request, max_bytes=max_bytes, timeout_s=timeout_s)

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.response = web.Response(
            status=status, body=body, headers={"Content-Type": content_type}
        )

    def error(self, err: ClientError) -> None:
        self.response = error_response_for(err, self._request.path)

    def start(self, status: int, content_type: str | None) -> None:
        stream = self._stream = ReplyHead(status=status)
        if content_type is not None:
            stream.headers["Content-Type"] = content_type
        self.response = stream

    async def _prepared(self) -> ReplyHead:
        stream = self._stream
        assert stream is not None
        if not stream.prepared:
            await stream.prepare(self._request)
        return stream

    async def write(self, data: bytes) -> None:
        await (await self._prepared()).write(data)

    async def write_eof(self, data: bytes) -> None:
        await (await self._prepared()).write_eof(data)

    def cut(self) -> None:
        transport = self._request.transport
        if transport is not None:
            transport.abort()
