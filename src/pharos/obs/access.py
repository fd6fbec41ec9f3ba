"""The access log: one info line per request, on logger `pharos.access` (`--no-access-log`
turns it off). Fields: method, path, route, key, model, target, status, TTFT, duration,
request id. Never prompt text or header values. /healthz and /metrics are left out: load
balancers and Prometheus poll them every few seconds.

The proxy's RequestDone (key, model, target, TTFT) reaches the line through a per-request
context slot that `Observability.on_done` fills, since the proxy knows nothing of this log.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO, cast

from aiohttp import web

from pharos.obs.logfmt import LineFormatter, field, seconds
from pharos.proxy.bodies import BodyBudget
from pharos.proxy.done import RequestDone
from pharos.proxy.request_id import RequestIds, request_id_of

log = logging.getLogger("pharos.access")

QUIET_PATHS = frozenset({"/healthz", "/metrics"})
CLIENT_LEFT_STATUS = 499
_MAX_CLIENT_CHARS = 200
"""Path and model come from the client: one line stays short whatever it sends."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ApiErrors = Callable[[web.Request, web.HTTPException], web.StreamResponse | None]
"""An HTTPException as the API's error reply, or None to raise it on (proxy.app)."""


@dataclass(slots=True)
class _Slot:
    done: RequestDone | None = None


_current: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "pharos_access_slot", default=None
)


def note_done(done: RequestDone) -> None:
    """Called with each RequestDone; fills the slot of the request being served, if any."""
    slot = _current.get()
    if slot is not None:
        slot.done = done


def access_line(
    method: str,
    path: str,
    status: int,
    duration_s: float,
    request_id: str,
    done: RequestDone | None,
) -> str:
    """One f-string: status and seconds never need quoting, so only the text fields pass through
    `field` (6.6 µs a line as a tuple of pairs joined by a generator, measured)."""
    if done is None:
        route = key = model = target = "-"
        ttft_s = None
    else:
        route = field(done.route)
        key = field(done.key)
        model = field((done.model or "-")[:_MAX_CLIENT_CHARS])
        target = field(done.target_key or "-")
        ttft_s = done.ttft_s
    return (
        f"access method={field(method)} path={field(path[:_MAX_CLIENT_CHARS])} route={route} "
        f"key={key} model={model} target={target} status={status} ttft={seconds(ttft_s)} "
        f"duration={seconds(duration_s)} id={field(request_id)}"
    )


class AccessLog:
    """The access middleware and where its lines go (state: the lines of this loop turn).

    Through `logging`, a line cost a LogRecord, findCaller's frame walk, the handler's lock,
    a write and a flush: 5.6% of `pharos serve`'s samples at c=32. When the line would reach
    exactly one plain StreamHandler with a LineFormatter (what `pharos serve` sets up), the
    same text is built here and written to that handler's stream once per loop turn, at most
    `max_held_lines` at a time, and on `flush()` at shutdown. Anything else (another handler,
    a filter, a test's caplog, a format naming other fields) gets the record through
    `logging` as before. The `pharos.access` logger's level stays the switch."""

    def __init__(
        self,
        ids: RequestIds | None = None,
        *,
        budget: BodyBudget | None = None,
        api_errors: ApiErrors | None = None,
        wall_s: Callable[[], float] = time.time,
        max_held_lines: int = 256,
    ) -> None:
        """`budget`, `api_errors`: the proxy's body budget and its 404/405 pages, run in this
        one layer (three middlewares were three coroutine layers a request, plus aiohttp's
        own per-app one each middleware chain brings)."""
        self._ids = ids
        self._budget = budget
        self._api_errors = api_errors
        self._wall_s = wall_s
        self._max_held = max_held_lines
        self._held: list[str] = []
        self._held_for: logging.StreamHandler[TextIO] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        hold = None if self._budget is None else self._budget.hold(request)
        logged = request.path not in QUIET_PATHS and log.isEnabledFor(logging.INFO)
        started = time.monotonic()
        slot = _Slot()
        token = _current.set(slot) if logged else None
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            answer = None if self._api_errors is None else self._api_errors(request, exc)
            if answer is None:
                status = exc.status
                raise
            status = answer.status
            return answer
        except asyncio.CancelledError:
            status = CLIENT_LEFT_STATUS
            raise
        finally:
            if hold is not None:
                hold.release()
            if token is not None:
                _current.reset(token)
                if slot.done is not None:
                    status = slot.done.status
                self.write(
                    access_line(
                        request.method,
                        request.path,
                        status,
                        time.monotonic() - started,
                        request_id_of(request, self._ids),
                        slot.done,
                    )
                )

    def begin(self) -> _Slot | None:
        """A request served outside aiohttp (proxy/front.py) starts, in its own task: the
        slot its RequestDone fills, or None when the line is off."""
        if not log.isEnabledFor(logging.INFO):
            return None
        slot = _Slot()
        _current.set(slot)  # the task's own context: nothing to reset
        return slot

    def served(
        self, slot: object, method: str, path: str, status: int, started_s: float, request_id: str
    ) -> None:
        """The access line of a request `begin` started (the middleware's line, to the byte)."""
        if not isinstance(slot, _Slot):
            return
        if slot.done is not None:
            status = slot.done.status
        self.write(
            access_line(method, path, status, time.monotonic() - started_s, request_id, slot.done)
        )

    def write(self, message: str) -> None:
        """One access line at info level, as `log.info(message)` would write it."""
        plain = _plain_handler()
        if plain is None or (self._held_for is not None and plain is not self._held_for):
            self.flush()
            if plain is None:
                log.info(message)
                return
        formatter = plain.formatter
        assert isinstance(formatter, LineFormatter)
        text = formatter.plain_line(log.name, "INFO", message, self._wall_s())
        held = self._held
        if not held:
            self._held_for = plain
            self._flush_soon()
        held.append(text + plain.terminator)
        if len(held) >= self._max_held:
            self.flush()

    def _flush_soon(self) -> None:
        """flush() once this loop turn ends. The loop is kept: asyncio.get_running_loop() is
        a getpid syscall a call in CPython; a closed one (a test's earlier loop) is replaced."""
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the held lines in one write (a no-op when none are held)."""
        handler, held = self._held_for, self._held
        if handler is None or not held:
            return
        self._held = []
        self._held_for = None
        handler.acquire()
        try:
            handler.stream.write("".join(held))
            handler.stream.flush()
        except Exception:  # a closed or full stream: as StreamHandler.emit, never raised
            handler.handleError(logging.makeLogRecord({"msg": "access lines", "name": log.name}))
        finally:
            handler.release()


def _plain_handler() -> logging.StreamHandler[TextIO] | None:
    """The one handler an info record of `pharos.access` reaches, when it is a plain
    StreamHandler formatting with a LineFormatter of plain fields; else None."""
    node: logging.Logger | None = log
    found: list[logging.Handler] = []
    while node is not None:
        if node.filters:
            return None
        found.extend(node.handlers)
        if not node.propagate:
            break
        node = node.parent
    if len(found) != 1:
        return None
    handler = found[0]
    if (
        type(handler) is not logging.StreamHandler
        or handler.filters
        or handler.level > logging.INFO
        or type(handler.formatter) is not LineFormatter
        or not handler.formatter.formats_plainly
    ):
        return None
    return cast("logging.StreamHandler[TextIO]", handler)
