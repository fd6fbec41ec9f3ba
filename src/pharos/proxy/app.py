"""The public HTTP surface: the route table of spec §9 and the request path up to forwarding.

Request path: auth → bounded body read → partial parse → allow-list and
admission (rpm, daily tokens) → ask for usage on streamed chat → Forwarder.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from pharos.clock import Clock
from pharos.engine.usage import Usage
from pharos.proxy import catalog
from pharos.proxy.auth import KeyEntry
from pharos.proxy.bodies import read_body
from pharos.proxy.done import RequestDone, RequestRecord, finish
from pharos.proxy.errors import (
    ClientError,
    error_response_for,
    model_not_found,
)
from pharos.proxy.forward import Exchange, Forwarder
from pharos.proxy.frontside import AiohttpSide, ClientSide
from pharos.proxy.keys import KeyRing
from pharos.proxy.parse import ChainMemo, ask_for_usage, parse_request
from pharos.proxy.pool import UpstreamClient
from pharos.proxy.request_id import RequestIds
from pharos.proxy.upstream import Route
from pharos.sched import Scheduler
from pharos.state import State
from pharos.usage import OUT_OF_QUOTA, UsageBook

log = logging.getLogger("pharos.proxy")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

ROUTES: dict[str, Route] = {
    "/v1/chat/completions": Route("chat", "chat"),
    "/v1/completions": Route("completions", "completion"),
    "/v1/embeddings": Route("embeddings", "embeddings"),
    "/v1/messages": Route("messages", "messages", coding_agent=True),
    # Tokenizing only: parsed without a chain, so it never claims a slot's prefix.
    "/v1/messages/count_tokens": Route("count_tokens", "count_tokens", coding_agent=True),
    "/v1/responses": Route("responses", "responses", coding_agent=True),
    "/api/chat": Route("ollama-chat", "chat", ollama_native=True),
    "/api/generate": Route("ollama-generate", "generate", ollama_native=True),
    "/api/embed": Route("ollama-embed", "embeddings", ollama_native=True),
    "/api/embeddings": Route("ollama-embeddings", "completion", ollama_native=True),
}

_INFO_ROUTES = {"/api/tags": "ollama-tags", "/api/ps": "ollama-ps", "/api/show": "ollama-show"}


PHAROS_ERROR = ClientError(
    500,
    "Pharos failed on this request; its log has the details.",
    "server_error",
    "pharos_error",
)


def api_error_for(request: web.Request, exc: web.HTTPException) -> web.StreamResponse | None:
    """aiohttp's own 404 and 405 pages in the API's error shape, which SDKs can parse; None
    for any other HTTPException (raised on as it is)."""
    if exc.status not in (404, 405):
        return None
    code = "not_found" if exc.status == 404 else "method_not_allowed"
    message = (
        f"{request.method} {request.path} is not a route Pharos serves"
        if exc.status == 404
        else f"{request.path} does not accept {request.method}"
    )
    err = ClientError(exc.status, message, "invalid_request_error", code)
    response = error_response_for(err, request.path)
    if exc.status == 405 and "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response


@web.middleware
async def json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """api_error_for as a middleware of its own (`pharos serve` folds it into obs.access's)."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        response = api_error_for(request, exc)
        if response is None:
            raise
        return response


@dataclass
class ProxyOptions:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    seed: int | None = None  # for the per-request tie-break seeds; None = random
    body_read_s: float = 60.0  # a body not read by then is a 408 (limits.client_body)
    upstream_idle_s: float = (
        600.0  # no byte from the engine for this long: cut (limits.upstream_idle)
    )


class Flags:
    """Readiness and drain, read by /healthz and /status.

    Ready once every gate is set (State's first scrape round, the startup restore),
    until `drain()`; nothing polls: the gates are events their owners set."""

    def __init__(self, *gates: asyncio.Event) -> None:
        self._gates = gates
        self.draining = False

    def ready(self) -> bool:
        return all(gate.is_set() for gate in self._gates)

    def drain(self) -> None:
        self.draining = True


class Proxy:
    """The inference and model-list routes; every piece it uses is passed in."""

    def __init__(
        self,
        *,
        clock: Clock,
        session: aiohttp.ClientSession,
        upstream: UpstreamClient,
        state: State,
        sched: Scheduler,
        usage: UsageBook | None,
        keys: KeyRing,
        flags: Flags,
        on_done: Callable[[RequestDone], None],
        options: ProxyOptions,
        request_ids: RequestIds | None = None,
    ) -> None:
        self.clock = clock
        self._request_ids = request_ids
        self.session = session
        self.state = state
        self.sched = sched
        self.usage = usage
        self.keys = keys
        self.flags = flags
        self.on_done = on_done
        self.options = options
        self.inflight_streams = 0
        self._chains = ChainMemo()  # the last chats' links: a chat's next turn repeats them
        self._forwarder = Forwarder(
            clock=clock,
            upstream=upstream,
            state=state,
            sched=sched,
            rng=random.Random(options.seed),
            meter=self._meter,
            idle_timeout_s=options.upstream_idle_s,
        )

    def _meter(self, key: str, model: str, usage: Usage | None) -> None:
        if self.usage is None:
            return
        if usage is None:
            self.usage.record_reply(key, model, None, None, None)
        else:
            self.usage.record_reply(
                key, model, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens
            )

    # ---- wiring -------------------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        for path, route in ROUTES.items():
            app.router.add_post(path, self._inference_handler(route))
        app.router.add_get("/v1/models", self._guarded(self._models))
        app.router.add_get("/v1/models/{model:.+}", self._guarded(self._model))
        app.router.add_get("/api/tags", self._guarded(self._ollama_tags))
        app.router.add_get("/api/ps", self._guarded(self._ollama_ps))
        app.router.add_post("/api/show", self._guarded(self._ollama_show))
        app.router.add_get("/api/version", self._ollama_version)
        app.router.add_get("/", self._ollama_root)
        app.router.add_route("*", "/api/{rest:.*}", self._ollama_unsupported)
        app.router.add_get("/healthz", self._healthz)

    # ---- auth -----------------------------------------------------------------------------

    def authenticate(self, request: web.Request) -> KeyEntry:
        return self.keys.authenticate(request)

    def _guarded(
        self, handler: Callable[[web.Request, KeyEntry], Awaitable[web.StreamResponse]]
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def guarded(request: web.Request) -> web.StreamResponse:
            """Model lists and Ollama's info routes: a refusal is logged and counted like an
            inference route's (Open WebUI's keyless Ollama connection showed no models and
            no sign of why)."""
            record = RequestRecord(
                route=_INFO_ROUTES.get(request.path, "models"),
                started_s=self.clock.now(),
                request_id=request.headers.get("X-Request-Id"),
            )
            status = 500
            try:
                key = self.authenticate(request)
                record.key = key.name
                record.decide("admission", "ok")
                response = await handler(request, key)
                status = response.status
                return response
            except ClientError as err:
                status = err.status
                if err.outcome is not None:
                    record.decide(*err.outcome)
                if status == 401:
                    log.info("401 on %s %s: no valid key", request.method, request.path)
                return error_response_for(err, request.path)
            finally:
                self.on_done(finish(record, status, self.clock.now(), self.clock.time()))

        return guarded

    # ---- inference ------------------------------------------------------------------------

    def _inference_handler(
        self, route: Route
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """`_inference` itself with its route bound: a wrapper coroutine per request took 1.0%
        of `pharos serve`'s samples at c=32 (py-spy)."""
        return functools.partial(self._inference, route=route)

    async def _read_body(self, request: web.Request) -> bytes:
        return await read_body(
            request, max_bytes=self.options.max_body_bytes, timeout_s=self.options.body_read_s
        )

    def _admit(self, key: KeyEntry, model: str) -> None:
        if key.models and model not in key.models:
            err = model_not_found(model)
            raise ClientError(
                err.status,
                err.message,
                err.type,
                err.code,
                None,
                ("admission", "model_not_allowed"),
            )
        if self.usage is None or (key.rpm is None and key.tokens_per_day is None):
            return
        verdict = self.usage.admit(key.name, key.rpm, key.tokens_per_day)
        if verdict.ok:
            return
        if verdict.code == OUT_OF_QUOTA:
            raise ClientError(
                429,
                f"Key `{key.name}` has used its {key.tokens_per_day} tokens for today; "
                "the quota resets at midnight.",
                "insufficient_quota",
                "insufficient_quota",
                verdict.retry_after_s,
                ("admission", "quota_exceeded"),
            )
        raise ClientError(
            429,
            f"Rate limit reached for key `{key.name}`: {key.rpm} requests per minute.",
            "rate_limit_error",
            "rate_limit_exceeded",
            verdict.retry_after_s,
            ("admission", "rate_limited"),
        )

    async def _inference(self, request: web.Request, route: Route) -> web.StreamResponse:
        """An inference route through aiohttp's server (its test clients, handed-off
        connections); proxy/front.py calls `serve` itself."""
        side = AiohttpSide(request, self._request_ids)
        await self.serve(side, route)
        assert side.response is not None
        return side.response

    async def serve(self, client: ClientSide, route: Route) -> int:
        """One inference request, its reply sent through `client`; returns the status."""
        record = RequestRecord(
            route=route.name,
            started_s=self.clock.now(),
            request_id=client.request_id(),
        )
        status = 500
        self.inflight_streams += 1
        try:
            key = self.keys.authenticate_headers(
                client.header("Authorization"), client.header("x-api-key"), client.path
            )
            record.key = key.name
            body = await client.read_body(self.options.max_body_bytes, self.options.body_read_s)
            parsed = parse_request(
                body, route=route.parse_as, stream_default=route.ollama_native, memo=self._chains
            )
            record.model = parsed.model
            self._admit(key, parsed.model)
            record.decide("admission", "ok")
            strip = False
            if route.name in ("chat", "completions") and parsed.stream:
                if parsed.asked_for_usage:
                    record.decide("usage", "client_asked")
                else:
                    body = ask_for_usage(body, has_stream_options=parsed.has_stream_options)
                    strip = True
                    record.decide("usage", "pharos_asked")
            status = await self._forwarder.run(
                Exchange(client, route, key, parsed, body, strip, record)
            )
            return status
        except ClientError as err:
            status = err.status
            if err.outcome is not None:
                record.decide(*err.outcome)
            client.error(err)
            return status
        except asyncio.CancelledError:
            status = 499
            raise
        except Exception:
            log.exception("proxy error on %s", client.path)
            status = 500
            record.decide("upstream", "pharos_error")
            client.error(PHAROS_ERROR)
            return status
        finally:
            self.inflight_streams -= 1
            self.on_done(finish(record, status, self.clock.now(), self.clock.time()))

    # ---- model lists and Ollama's informational routes ---------------------------------------

    async def _models(self, _request: web.Request, key: KeyEntry) -> web.StreamResponse:
        names = catalog.served_models(self.state, self.clock.now())
        allowed = [name for name in names if not key.models or name in key.models]
        return web.json_response(catalog.openai_model_list(allowed))

    async def _model(self, request: web.Request, key: KeyEntry) -> web.StreamResponse:
        model = request.match_info["model"]
        names = catalog.served_models(self.state, self.clock.now())
        if model not in names or (key.models and model not in key.models):
            raise model_not_found(model)
        return web.json_response(catalog.openai_model(model))

    async def _ollama_tags(self, _request: web.Request, key: KeyEntry) -> web.StreamResponse:
        body = await catalog.aggregate_ollama(
            self.state, self.session, self.clock.now(), "/api/tags", key.models
        )
        return web.json_response(body)

    async def _ollama_ps(self, _request: web.Request, key: KeyEntry) -> web.StreamResponse:
        body = await catalog.aggregate_ollama(
            self.state, self.session, self.clock.now(), "/api/ps", key.models
        )
        return web.json_response(body)

    async def _ollama_show(self, request: web.Request, key: KeyEntry) -> web.StreamResponse:
        body = await self._read_body(request)
        return await catalog.forward_show(
            self.state, self.session, self.clock.now(), body, key.models
        )

    async def _ollama_version(self, _request: web.Request) -> web.StreamResponse:
        version = catalog.oldest_ollama_version(self.state)
        return web.json_response({"version": version if version is not None else "0.0.0"})

    async def _ollama_root(self, _request: web.Request) -> web.StreamResponse:
        return web.Response(text="Ollama is running")

    async def _ollama_unsupported(self, request: web.Request) -> web.StreamResponse:
        rest = request.match_info.get("rest", "")
        return web.json_response(
            {
                "error": f"Pharos routes requests and does not manage models: /api/{rest} is not "
                "supported here; run it against the Ollama host itself"
            },
            status=501,
        )

    async def _healthz(self, _request: web.Request) -> web.StreamResponse:
        if self.flags.draining:
            return web.json_response({"status": "draining"}, status=503)
        if not self.flags.ready():
            return web.json_response({"status": "starting"}, status=503)
        return web.json_response({"status": "ok"})
