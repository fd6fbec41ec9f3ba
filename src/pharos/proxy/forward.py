"""Acquire a lease, forward upstream, stream the reply back through the tap (spec §9).

Retry once on another target, and only before anything was written to the
client: a refused connection or a reply that isn't HTTP (both eject the backend), a
5xx, or a 404 on a coding-agent route. After the first byte there are no retries; an engine that
dies mid-reply cuts the client's stream, so a truncated reply is never passed
off as complete.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

import aiohttp
import msgspec

from pharos.clock import Clock
from pharos.engine.types import Kind
from pharos.engine.usage import Usage
from pharos.proxy.auth import KeyEntry
from pharos.proxy.done import RequestRecord
from pharos.proxy.errors import ClientError, model_not_found, queue_full, unavailable
from pharos.proxy.frontside import ClientSide
from pharos.proxy.parse import ParsedRequest, rename_model
from pharos.proxy.pool import Reply, UpstreamClient
from pharos.proxy.rename import ReplyRename
from pharos.proxy.tap import StreamTap
from pharos.proxy.upstream import (
    CLIENT_LEFT,
    NO_REPLY,
    Refusal,
    Route,
    UpstreamDied,
    UpstreamIdle,
    forward_header_pairs,
    no_usage,
    not_on_ollama,
    refusal_message,
    upstream_idle,
    waited_in_vain,
)
from pharos.proxy.wire import BadReply, ReadTimeout, ReplyCut, WireError
from pharos.sched import (
    Feedback,
    Lease,
    NeverFits,
    QueueFull,
    QueueTimeout,
    RouteRequest,
    Scheduler,
    Unavailable,
    UnknownModel,
)
from pharos.state import State

log = logging.getLogger("pharos.proxy")

MeterFn = Callable[[str, str, Usage | None], None]
"""(key name, client model, usage or None = unmetered): counts one finished reply."""


class Exchange(msgspec.Struct):
    """One client request on its way through the proxy: what it knows so far.

    Built by the app once the request is admitted; every attempt reads and fills it. A mutable
    msgspec Struct, as RequestRecord: cheaper to build than a dataclass."""

    client: ClientSide
    route: Route
    key: KeyEntry
    parsed: ParsedRequest
    body: bytes  # as sent upstream: Pharos may have asked for the usage chunk
    strip_usage_chunk: bool  # Pharos asked for usage, so the client never sees that chunk
    record: RequestRecord
    excluded: set[int] = msgspec.field(default_factory=set)  # targets this request must not use
    attempt: int = 0
    refusal: Refusal | None = None  # the last engine answer worth passing on


class Forwarder:
    """Runs one request's attempts; the shared pieces are passed in."""

    def __init__(
        self,
        *,
        clock: Clock,
        upstream: UpstreamClient,
        state: State,
        sched: Scheduler,
        rng: random.Random,
        meter: MeterFn,
        idle_timeout_s: float = 600.0,
    ) -> None:
        self._clock = clock
        self._upstream = upstream
        self._state = state
        self._sched = sched
        self._rng = rng
        self._meter = meter
        self._idle_s = idle_timeout_s

    def _excluded_for(self, route: Route, model: str) -> set[int]:
        """/api/* goes to Ollama backends only: a model no Ollama lists is a 404 there."""
        if not route.ollama_native:
            return set()
        views = self._state.targets_for_model(model, self._clock.now())
        excluded = {view.target_id for view in views if view.kind is not Kind.OLLAMA}
        if views and len(excluded) == len(views):
            raise not_on_ollama(model)
        return excluded

    async def run(self, ex: Exchange) -> int:
        """The reply's status, sent through `ex.client`; ClientError for Pharos's own refusals."""
        parsed, record = ex.parsed, ex.record
        ex.excluded = self._excluded_for(ex.route, parsed.model)
        seed = self._rng.getrandbits(64)
        for attempt in range(2):
            ex.attempt = attempt
            route_request = RouteRequest(  # positional: 165 ns compiled, by keyword 602
                parsed.model,
                parsed.prompt_tokens,
                parsed.chain,
                seed,
                frozenset(ex.excluded),
                attempt > 0,
                parsed.control,
            )
            try:
                lease = await self._sched.acquire(ex.key.name, ex.key.weight, route_request)
            except (NeverFits, QueueTimeout) as failure:
                raise waited_in_vain(failure) from None
            except UnknownModel:
                if ex.refusal is not None:
                    return self._refused(ex.refusal, ex)
                raise model_not_found(parsed.model) from None
            except Unavailable:
                if ex.refusal is not None:
                    return self._refused(ex.refusal, ex)
                raise unavailable(parsed.model) from None
            except QueueFull:
                raise queue_full() from None
            except asyncio.CancelledError:
                record.decide("route", "client_left")
                raise
            try:
                outcome = await self._attempt(ex, lease)
            except asyncio.CancelledError:
                if not lease.released:
                    lease.release(CLIENT_LEFT)
                    record.decide("upstream", "client_left")
                raise
            finally:
                lease.release(NO_REPLY)  # a no-op unless an unexpected error skipped it
            if isinstance(outcome, int):
                return outcome
            ex.refusal = outcome if outcome is not None else ex.refusal
            ex.excluded.add(lease.target.target_id)
        if ex.refusal is None:
            raise unavailable(parsed.model)
        return self._refused(ex.refusal, ex)

    def _refused(self, refusal: Refusal, ex: Exchange) -> int:
        """The engine's own answer when no other target took the retry."""
        route = ex.route
        if route.coding_agent and refusal.status == 404:
            raise ClientError(
                400,
                f"The backend {refusal.backend_url} does not serve /v1/{route.name} (it answered "
                "404) and no other backend serving this model does.",
                "invalid_request_error",
                "route_not_served",
                None,
                ("upstream", "error_status"),
            )
        ex.client.reply(refusal.status, refusal.body, refusal.content_type)
        return refusal.status

    def _note_lease(self, ex: Exchange, lease: Lease) -> None:
        record = ex.record
        record.decide("route", lease.route_outcome)
        record.decide("queue", lease.queue_outcome)
        record.target_key = lease.target.key
        record.backend_url = lease.target.backend_url
        record.decision = lease.decision  # its reason string (3-7 µs) is built after the reply
        record.queued_by = lease.queued_by
        record.queue_wait_s = lease.queue_wait_s
        record.prefix_source = (
            lease.predicted.source.name.lower() if lease.predicted is not None else None
        )
        if ex.attempt == 0:
            record.overhead_s = max(0.0, self._clock.now() - record.started_s - lease.queue_wait_s)

    async def _attempt(self, ex: Exchange, lease: Lease) -> int | Refusal | None:
        """The reply, a refusal worth retrying elsewhere, or None when the connection failed."""
        target = lease.target
        self._note_lease(ex, lease)
        out_body = (
            ex.body
            if target.served_model == target.model
            else rename_model(ex.body, target.served_model)
        )
        sent_s = self._clock.now()
        try:
            upstream = await self._upstream.post(
                target.backend_url,
                ex.client.path_qs,
                out_body,
                forward_header_pairs(ex.client.header_pairs()),
                idle_s=self._idle_s,
            )
        except ReadTimeout:
            lease.release(NO_REPLY)  # the engine may still be working on it: no retry, no eject
            raise upstream_idle(self._idle_s) from None
        except WireError as exc:  # refused, closed before the reply, or no HTTP reply
            self._connect_failed(ex, lease, exc)
            return None

        status = upstream.status
        if not (status >= 500 or (status == 404 and ex.route.coding_agent)):
            try:
                first = upstream.read_nowait()  # what came with the engine's head
            except WireError as exc:  # its body broke in the head's read: nothing sent yet
                upstream.close()
                self._connect_failed(ex, lease, exc)
                return None
            return await self._stream(ex, upstream, lease, sent_s, first)
        try:
            refused_body = await upstream.read()
        except WireError as exc:
            upstream.close()
            self._connect_failed(ex, lease, exc)
            return None
        finally:
            upstream.release()
        lease.release(no_usage(status, None, self._clock.now() - sent_s))
        if status >= 500 and status != 503:
            log.warning(
                "backend %s refused a request with %d: %s",
                target.backend_url,
                status,
                refusal_message(refused_body),
            )
        ex.record.decide("upstream", "busy_retried" if status == 503 else "error_retried")
        return Refusal(
            status,
            refused_body,
            upstream.headers.get("content-type", "application/json"),
            target.backend_url,
        )

    def _connect_failed(self, ex: Exchange, lease: Lease, exc: WireError) -> None:
        """A refused or broken connection, or a reply that isn't HTTP, before anything reached
        the client: eject, and retry elsewhere (a broken head was a Pharos 500 with a
        traceback under aiohttp)."""
        bad = isinstance(exc, BadReply | ReplyCut)
        what = "bad reply" if bad else "connect failed"
        self._state.eject(lease.target.backend_url, f"{what}: {type(exc).__name__}")
        lease.release(NO_REPLY)
        ex.record.decide("upstream", "bad_reply" if bad else "connect_failed")

    async def _stream(
        self, ex: Exchange, upstream: Reply, lease: Lease, sent_s: float, first: bytes
    ) -> int:
        target, record, client = lease.target, ex.record, ex.client
        status = upstream.status
        rename = (
            None
            if target.served_model == target.model
            else ReplyRename(target.served_model, target.model)
        )
        tap = StreamTap(strip_usage_chunk=ex.strip_usage_chunk and status == 200, rename=rename)
        ttft_s: float | None = None

        try:
            client.start(status, upstream.headers.get("content-type"))
            try:
                if first:
                    ttft_s = self._clock.now() - sent_s
                    first = tap.feed(first)
                last = first
                if not upstream.ended():
                    await client.write(first)  # our head with it in one write, or alone now
                    last = b""
                    while chunk := await upstream.next_chunk():
                        if ttft_s is None:
                            ttft_s = self._clock.now() - sent_s
                        out = tap.feed(chunk)
                        if upstream.ended():
                            last = out
                            break
                        if out:
                            await client.write(out)
            except ReadTimeout as exc:
                raise UpstreamIdle from exc
            except WireError as exc:
                raise UpstreamDied(type(exc).__name__) from exc
            rest, usage = tap.finish()
            # The engine's last read goes out with the stream's end in one write (with the
            # head too when the whole reply came in one read): a write and a syscall fewer.
            await client.write_eof(last + rest)
        except UpstreamIdle:
            upstream.close()
            lease.release(no_usage(status, ttft_s, self._clock.now() - sent_s))
            record.decide("upstream", "idle_timeout")
            record.metered = False
            if record.model is not None:  # unmetered, never 0 tokens
                self._meter(record.key, record.model, None)
            client.cut()
            return status
        except UpstreamDied as died:
            self._state.eject(target.backend_url, f"died mid-reply: {died}")
            lease.release(no_usage(status, ttft_s, self._clock.now() - sent_s, died_mid_reply=True))
            record.decide("upstream", "died_mid_reply")
            record.metered = False
            if record.model is not None:  # unmetered, never 0 tokens
                self._meter(record.key, record.model, None)
            client.cut()
            return status
        except (asyncio.CancelledError, ConnectionError, aiohttp.ClientConnectionResetError) as exc:
            upstream.close()
            lease.release(no_usage(status, ttft_s, self._clock.now() - sent_s, client_left=True))
            record.decide("upstream", "client_left")
            if isinstance(exc, asyncio.CancelledError):
                raise
            return status
        except Exception:
            log.exception("proxy error while streaming from %s", target.backend_url)
            upstream.close()
            lease.release(NO_REPLY)
            record.decide("upstream", "pharos_error")
            client.cut()
            return status
        finally:
            upstream.release()
        self._finished(ex, lease, Feedback(status, ttft_s, self._clock.now() - sent_s, usage))
        return status

    def _finished(self, ex: Exchange, lease: Lease, fb: Feedback) -> None:
        """Feedback, decisions and metering of a reply the engine ended cleanly."""
        lease.release(fb)
        record = ex.record
        ok = fb.status is not None and 200 <= fb.status < 300
        record.decide("upstream", "ok" if ok else "error_status")
        record.ttft_s = fb.ttft_s
        record.usage = fb.usage
        if not ok:
            return
        record.decide("prefix", lease.prefix_outcome(fb))
        load = lease.load_outcome(fb)
        if load is not None:
            record.decide("load", load)
        record.metered = fb.prompt_tokens is not None and fb.completion_tokens is not None
        self._meter(record.key, lease.request.model, fb.usage)
