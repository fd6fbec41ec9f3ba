"""The public listener's limits: idle and header-read bound, a connection cap, quiet errors.

Measured before (issue 11): slowloris connections lived forever; 1,100 of them under a
1024-fd limit refused every client and /healthz with nothing logged; a malformed request
logged a traceback echoing up to 100 bytes of a bad header (an oversized Authorization
included) and was answered in plain text.

aiohttp 3.14's keep-alive timer starts when a connection opens and again after each
response, and closes the connection if no complete request head arrived by then: one
bound covers a fresh connection, a slow header read and an idle keep-alive.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

import msgspec
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from pharos.proxy.front import Front, FrontConnection

log = logging.getLogger("pharos.listener")

REFUSAL_LOG_INTERVAL_S = 10.0
"""At most one warning per interval while connections are refused: a flood is one line."""


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    idle_s: float = 30.0  # no complete request head for this long (fresh or kept alive): closed
    max_connections: int = 768  # client connections at once; beyond it new ones are refused


def _json_error(status: int, message: str, code: str, *, ollama: bool) -> bytes:
    if ollama:
        return msgspec.json.encode({"error": message})
    kind = "invalid_request_error" if status < 500 else "server_error"
    return msgspec.json.encode(
        {"error": {"message": message, "type": kind, "code": code, "param": None}}
    )


_BUSY_BODY = _json_error(
    503,
    "Pharos has too many client connections open; retry shortly.",
    "too_many_connections",
    ollama=False,
)
_BUSY_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
    + str(len(_BUSY_BODY)).encode()
    + b"\r\n\r\n"
    + _BUSY_BODY
)


class _Refused(asyncio.Protocol):
    """A connection past the cap: one 503 in the API's error shape, then closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport is no asyncio.Transport subclass (the hostile battery
        # found an isinstance assert failing there): rely on the protocol, not the class.
        cast(asyncio.WriteTransport, transport).write(_BUSY_REPLY)
        transport.close()


class _QuietHandler(RequestHandler):
    """aiohttp's error path, minus the traceback and header values, in the API's shape."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,  # noqa: ARG002 (aiohttp's signature)
    ) -> web.StreamResponse:
        name = type(exc).__name__ if exc is not None else "-"
        if status >= 500:
            # Pharos's own handlers catch their errors; reaching here is a bug worth a line.
            log.error("request failed inside the HTTP server: status=%d error=%s", status, name)
        else:
            log.debug("malformed HTTP request: status=%d error=%s", status, name)
        if request.writer.output_size > 0:
            raise ConnectionError("the reply had started; the connection is closed instead")
        if status >= 500:
            text = "Pharos failed on this request; its log has the details."
        else:
            text = f"Malformed HTTP request ({name}); nothing was routed."
        ollama = request.path.startswith("/api/")
        code = "pharos_error" if status >= 500 else "bad_http_request"
        response = web.Response(
            status=status,
            body=_json_error(status, text, code, ollama=ollama),
            content_type="application/json",
        )
        response.force_close()
        return response


class _GuardedServer(web.Server):
    """Counts connections; past the cap a new one gets a 503 and is closed (and logged).

    With a `front` (proxy/front.py) a new connection starts as a FrontConnection, counted in
    the same table, which hands itself to a _QuietHandler for anything but the plain
    inference request."""

    def __init__(
        self, *args: Any, limits: ListenerLimits, front: Front | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._front = front
        self._refused = 0
        self._last_refusal_log: float | None = None

    def __call__(self) -> RequestHandler:
        if len(self._connections) >= self._limits.max_connections:
            self._note_refusal()
            return _Refused()  # type: ignore[return-value]
        if self._front is not None:
            return FrontConnection(self._front, self, self._loop)  # type: ignore[return-value]
        return self.aiohttp_handler()

    def aiohttp_handler(self) -> RequestHandler:
        return _QuietHandler(self, loop=self._loop, **self._kwargs)

    # The front's connections sit in aiohttp's table: counted by the cap, closed by the drain
    # (pre_shutdown's close(), shutdown's shutdown(timeout)), which both kinds implement.
    def front_connected(self, conn: FrontConnection) -> None:
        self._connections[conn] = conn.transport  # type: ignore[index,assignment]

    def front_lost(self, conn: FrontConnection) -> None:
        self._connections.pop(conn, None)  # type: ignore[call-overload]

    @property
    def refused(self) -> int:
        """Connections refused since start (for tests and the log line)."""
        return self._refused

    def _note_refusal(self) -> None:
        self._refused += 1
        now = self._loop.time()
        last = self._last_refusal_log
        if last is None or now - last >= REFUSAL_LOG_INTERVAL_S:
            self._last_refusal_log = now
            log.warning(
                "refusing client connections: %d open, at limits.max_connections; "
                "%d refused since start",
                len(self._connections),
                self._refused,
            )


class LimitedRunner(web.AppRunner):
    """web.AppRunner whose server applies ListenerLimits; `serve` uses it for the public port."""

    def __init__(
        self,
        app: web.Application,
        limits: ListenerLimits,
        *,
        front: Front | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, keepalive_timeout=limits.idle_s, **kwargs)
        self._limits = limits
        self._front = front

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts and freezes the app
        return _GuardedServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=asyncio.get_running_loop(),
            limits=self._limits,
            front=self._front,
            **plain._kwargs,
        )
