"""The reply side of one request the front serves (proxy/front.py reads the requests).

`FrontSide` is `proxy.frontside.ClientSide` written straight onto the connection: a whole
reply is one `transport.write` of head and body, a streamed one sends its head with the first
chunk, so a 10-token stream costs one write a chunk and none for the head alone.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Protocol

from aiohttp.http import SERVER_SOFTWARE

from pharos.proxy.bodies import BodyHold, body_timeout
from pharos.proxy.errors import ClientError, error_body_for, too_large
from pharos.proxy.fronthead import Head

SERVER = b"Server: " + SERVER_SOFTWARE.encode() + b"\r\n"
"""What aiohttp's server sends: a client can't tell which side answered."""


class Wire(Protocol):
    """The connection a FrontSide writes to (proxy/front.FrontConnection)."""

    async def body(self, size: int, timeout_s: float) -> bytes: ...

    def send(self, data: bytes) -> None: ...

    async def write(self, data: bytes) -> None: ...

    def abort(self) -> None: ...


class DateLine:
    """`Date: ...\\r\\n` for the reply heads, formatted once a second (one per Front)."""

    __slots__ = ("_line", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._line = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._line = b"Date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        return self._line


@functools.cache
def _status_line(status: int) -> bytes:
    """`HTTP/1.1 200 OK\r\n`, with the reason aiohttp gives (http.HTTPStatus's phrase)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return f"HTTP/1.1 {status} {reason}\r\n".encode()


class FrontSide:
    """proxy.frontside.ClientSide of one request on a FrontConnection."""

    __slots__ = (
        "_conn",
        "_date_line",
        "_head",
        "_hold",
        "_id",
        "_start",
        "done",
        "keep_alive",
        "status",
    )

    def __init__(
        self,
        conn: Wire,
        head: Head,
        request_id: str,
        hold: BodyHold | None,
        date_line: DateLine,
    ) -> None:
        self._conn = conn
        self._head = head
        self._id = request_id
        self._hold = hold
        self._date_line = date_line
        self._start: bytes | None = None  # a streamed reply's head, until its first write
        self.status = 0
        self.done = False  # the reply went out whole
        self.keep_alive = head.keep_alive

    @property
    def path(self) -> str:
        return self._head.path

    @property
    def path_qs(self) -> str:
        return self._head.path_qs

    def header(self, name: str) -> str | None:
        return self._head.get(name)

    def header_pairs(self) -> Iterable[tuple[str, str]]:
        return self._head.headers

    def request_id(self) -> str:
        return self._id

    def release(self) -> None:
        if self._hold is not None:
            self._hold.release()

    async def read_body(self, max_bytes: int, timeout_s: float) -> bytes:
        declared = self._head.content_length
        if declared > max_bytes:
            self.keep_alive = False  # the body stays unread
            raise too_large(max_bytes)
        if self._hold is not None:
            try:
                self._hold.take(declared)
            except ClientError:
                self.keep_alive = False
                raise
        try:
            return await self._conn.body(declared, timeout_s)
        except TimeoutError:
            self.keep_alive = False
            raise body_timeout(timeout_s) from None

    def _head_bytes(self, status: int, fields: bytes) -> bytes:
        self.status = status
        close = b"" if self.keep_alive else b"Connection: close\r\n"
        request_id = b"X-Request-Id: " + self._id.encode() + b"\r\n"
        return (
            _status_line(status)
            + fields
            + request_id
            + close
            + self._date_line()
            + SERVER
            + b"\r\n"
        )

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self._whole(status, body, content_type, None)

    def error(self, err: ClientError) -> None:
        retry = None
        if err.retry_after_s is not None:
            retry = str(max(1, int(err.retry_after_s + 0.999)))
        self._whole(err.status, error_body_for(err, self._head.path), "application/json", retry)

    def _whole(self, status: int, body: bytes, content_type: str, retry: str | None) -> None:
        fields = b"" if retry is None else b"Retry-After: " + retry.encode() + b"\r\n"
        fields += b"Content-Type: " + content_type.encode() + b"\r\n"
        fields += b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        self._conn.send(self._head_bytes(status, fields) + body)
        self.done = True

    def start(self, status: int, content_type: str | None) -> None:
        fields = b"Transfer-Encoding: chunked\r\n"
        if content_type is not None:
            fields = b"Content-Type: " + content_type.encode() + b"\r\n" + fields
        self._start = self._head_bytes(status, fields)

    async def write(self, data: bytes) -> None:
        out = b"%x\r\n%b\r\n" % (len(data), data) if data else b""
        if self._start is not None:
            out, self._start = self._start + out, None
        elif not out:
            return
        await self._conn.write(out)

    async def write_eof(self, data: bytes) -> None:
        out = (b"%x\r\n%b\r\n0\r\n\r\n" % (len(data), data)) if data else b"0\r\n\r\n"
        if self._start is not None:
            out, self._start = self._start + out, None
        await self._conn.write(out)
        self.done = True

    def cut(self) -> None:
        self.keep_alive = False
        self._conn.abort()
