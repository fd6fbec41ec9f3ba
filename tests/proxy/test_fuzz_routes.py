"""Property over HTTP: whatever body a client posts to whichever inference route, Pharos
never answers its own 5xx (issue 11, "Input"). Pharos and a fake engine run on a loop in
a background thread; hypothesis drives plain blocking requests. Bounded for CI."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pharos.cmd.runtime import Pharos, running
from pharos.config import Config
from pharos.engine.types import Kind
from pharos.fakeengine import FakeOllama, no_sleep, serve
from pharos.proxy.app import ROUTES
from pharos.state import BackendSpec
from tests.proxy.test_fuzz_bodies import bodies

MODEL = "qwen2.5:0.5b"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    ready: asyncio.Future[str] = loop.create_future()
    stop = asyncio.Event()

    async def main() -> None:
        async with contextlib.AsyncExitStack() as stack:
            url = await stack.enter_async_context(serve(FakeOllama(sleep=no_sleep)))
            pharos = Pharos(Config(), backends=[BackendSpec(url, Kind.OLLAMA)])
            pharos_url = await stack.enter_async_context(running(pharos))
            await pharos.wait_ready(10.0)
            ready.set_result(pharos_url)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    url = asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(ready), 20), loop)
    yield url.result(30)
    loop.call_soon_threadsafe(stop.set)
    thread.join(20)


def _post(base: str, path: str, body: bytes) -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _with_model(body: bytes, use_model: bool) -> bytes:
    """Half the bodies name the served model, so they reach routing and the engine."""
    if use_model and body.startswith(b"{") and len(body) > 2:
        return b'{"model":"' + MODEL.encode() + b'",' + body[1:]
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies(), path=st.sampled_from(sorted(ROUTES)), use_model=st.booleans())
def test_no_body_on_any_route_gets_a_5xx_from_pharos(
    base: str, body: bytes, path: str, use_model: bool
) -> None:
    status, reply = _post(base, path, _with_model(body, use_model))
    assert not (status >= 500 and b"pharos_error" in reply), (status, reply[:200])
