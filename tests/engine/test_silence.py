"""A backend that answers nothing in time is `silent`; one that refuses or drops is not.

The scraper holds a silent backend up while Pharos has requests on it (llama-cpp-python
answers nothing while it generates); a refused or dropped connection is a failure at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from pharos.engine import BackendUnreachable, Kind, Plan, resolve, scrape
from tests.engine.server import NO_ANSWER, Reply, serve
from tests.engine.test_resolve import llamacpp

TIMEOUT_S = 0.2


@asynccontextmanager
async def stalling() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """Every GET waits until the event is set (after the client gave up)."""
    answer = asyncio.Event()

    async def handle(_request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(answer.wait(), timeout=10.0)
        return web.Response(status=500)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), answer
    finally:
        answer.set()
        await server.close()


async def _plan() -> Plan:
    async with serve(llamacpp()) as engine, aiohttp.ClientSession() as session:
        plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP)
    return plan


async def test_a_scrape_whose_every_path_times_out_is_silent() -> None:
    plan = await _plan()
    async with stalling() as (base, _), aiohttp.ClientSession() as session:
        result = await scrape(plan, session, base, timeout_s=TIMEOUT_S)
    assert not result.answered and result.silent
    assert all("timeout" in reason for reason in result.failed.values())


async def test_a_refused_connection_is_not_silent() -> None:
    plan = await _plan()
    async with serve(llamacpp()) as engine:
        base = engine.base_url  # closed on exit: the port refuses from here on
    async with aiohttp.ClientSession() as session:
        result = await scrape(plan, session, base, timeout_s=TIMEOUT_S)
    assert not result.answered and not result.silent


async def test_a_dropped_connection_or_a_5xx_is_not_silent() -> None:
    plan = await _plan()
    dropped = {path: NO_ANSWER for path in llamacpp()}
    errors = {path: Reply(status=503) for path in llamacpp()}
    for routes in (dropped, errors):
        async with serve(routes) as engine, aiohttp.ClientSession() as session:
            result = await scrape(plan, session, engine.base_url, timeout_s=TIMEOUT_S)
        assert not result.answered and not result.silent, routes


@pytest.mark.parametrize("kind", [Kind.LLAMACPP, Kind.AUTO])  # AUTO: fails in detection
async def test_a_resolve_that_only_times_out_raises_a_silent_unreachable(kind: Kind) -> None:
    async with stalling() as (base, _), aiohttp.ClientSession() as session:
        with pytest.raises(BackendUnreachable) as raised:
            await resolve(session, base, kind, timeout_s=TIMEOUT_S)
    assert raised.value.silent


async def test_a_resolve_refused_raises_an_unreachable_that_is_not_silent() -> None:
    async with serve(llamacpp()) as engine:
        base = engine.base_url
    async with aiohttp.ClientSession() as session:
        with pytest.raises(BackendUnreachable) as raised:
            await resolve(session, base, Kind.LLAMACPP, timeout_s=TIMEOUT_S)
    assert not raised.value.silent
