"""A scripted engine for tests: an aiohttp server on 127.0.0.1 serving canned replies."""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.test_utils import TestServer


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"


NO_ANSWER = Reply(status=0)
"""The connection is dropped without a response (what curl records as 000)."""


@dataclass
class Engine:
    base_url: str
    hits: collections.Counter[str] = field(default_factory=collections.Counter)
    unexpected: list[str] = field(default_factory=list)  # paths the script did not cover


@asynccontextmanager
async def serve(routes: Mapping[str, Reply]) -> AsyncIterator[Engine]:
    """Serves `routes` (path -> Reply). Any other path answers 500 and is recorded."""
    engine = Engine(base_url="")

    async def handle(request: web.Request) -> web.StreamResponse:
        engine.hits[request.path_qs] += 1
        reply = routes.get(request.path_qs)
        if reply is None:
            engine.unexpected.append(request.path_qs)
            return web.Response(status=500, text="path not in the test script")
        if reply.status == 0:
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        return web.Response(status=reply.status, body=reply.body, content_type=reply.content_type)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        engine.base_url = str(server.make_url("")).rstrip("/")
        yield engine
    finally:
        await server.close()


def json_reply(text: str, status: int = 200) -> Reply:
    return Reply(status=status, body=text.encode())


def text_reply(text: str, status: int = 200) -> Reply:
    return Reply(status=status, body=text.encode(), content_type="text/plain")
