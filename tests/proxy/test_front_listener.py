"""The front (proxy/front.py) behind the real public listener on 127.0.0.1: it serves the
plain inference request, answers as aiohttp did, keeps the listener's bounds, and hands
everything else to aiohttp on the same connection."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from pharos.cmd.runtime import Pharos, RuntimeOptions
from pharos.config import parse_config
from pharos.proxy.front import FrontConnection
from pharos.proxy.listener import LimitedRunner

BOUND_S = 5.0
CONFIG = "limits:\n  client_idle: 300ms\n  client_body: 300ms\n  max_connections: 4\nbackends: []\n"
KEYED = (
    'keys:\n  - name: alice\n    sha256: "' + "ab" * 32 + '"\n'
    "limits:\n  client_idle: 300ms\nbackends: []\n"
)


async def serving(config: str, *, front: bool) -> tuple[Pharos, LimitedRunner, int]:
    pharos = Pharos(parse_config(config, "test"), options=RuntimeOptions(front=front))
    runner = pharos.public_runner(shutdown_timeout_s=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    await pharos.start()
    return pharos, runner, runner.addresses[0][1]


@pytest.fixture
async def front() -> AsyncIterator[tuple[LimitedRunner, int]]:
    pharos, runner, port = await serving(CONFIG, front=True)
    yield runner, port
    await runner.cleanup()
    await pharos.stop()


def chat(
    body: bytes = b'{"model":"m","messages":[]}', *, rid: str = "t-1", extra: bytes = b""
) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: " + rid.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n"
        + extra
        + b"\r\n"
        + body
    )


async def reply_of(reader: asyncio.StreamReader) -> tuple[str, set[bytes], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
    lines = head[:-4].split(b"\r\n")
    fields = {line for line in lines[1:] if not line.startswith(b"Date: ")}
    (length,) = [int(line.split(b": ")[1]) for line in lines if line.startswith(b"Content-Length")]
    body = await asyncio.wait_for(reader.readexactly(length), BOUND_S)
    return lines[0].decode(), fields, body


async def exchange(port: int, data: bytes, replies: int = 1) -> list[tuple[str, set[bytes], bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    try:
        return [await reply_of(reader) for _ in range(replies)]
    finally:
        writer.close()


async def test_the_plain_request_is_the_fronts_and_a_get_is_aiohttps(
    front: tuple[LimitedRunner, int],
) -> None:
    runner, port = front
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(chat()[:-5])  # the head is whole, the body not yet
    await writer.drain()
    server = runner.server
    assert server is not None
    for _ in range(100):
        if any(isinstance(c, FrontConnection) for c in server.connections):
            break
        await asyncio.sleep(0.01)
    assert [type(c).__name__ for c in server.connections] == ["FrontConnection"]
    writer.write(chat()[-5:] + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = await reply_of(reader)
    assert status == "HTTP/1.1 404 Not Found"
    assert json.loads(body)["error"]["code"] == "model_not_found"
    status, _, _ = await reply_of(reader)  # handed off: aiohttp's /healthz
    assert status.startswith("HTTP/1.1 ")
    assert not any(isinstance(c, FrontConnection) for c in server.connections)
    writer.close()


CASES = [
    ("unknown model", CONFIG, chat()),
    ("not JSON", CONFIG, chat(b"{nope")),
    (
        "too large",
        CONFIG,
        chat(b"{}", extra=b"").replace(b"Content-Length: 2", b"Content-Length: 99999999999"),
    ),
    ("no key", KEYED, chat()),
    ("wrong key", KEYED, chat(extra=b"Authorization: Bearer nope\r\n")),
    ("anthropic no key", KEYED, chat().replace(b"/v1/chat/completions", b"/v1/messages")),
    ("ollama", CONFIG, chat().replace(b"/v1/chat/completions", b"/api/chat")),
    ("query", CONFIG, chat().replace(b"/v1/chat/completions", b"/v1/chat/completions?a=1")),
]


@pytest.mark.parametrize(("name", "config", "data"), CASES, ids=[c[0] for c in CASES])
async def test_the_fronts_replies_are_aiohttps_to_the_header(
    name: str, config: str, data: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.access")
    seen = {}
    lines = {}
    for use_front in (True, False):
        caplog.clear()
        pharos, runner, port = await serving(config, front=use_front)
        try:
            seen[use_front] = (await exchange(port, data))[0]
        finally:
            await runner.cleanup()
            await pharos.stop()
        (record,) = [r for r in caplog.records if r.name == "pharos.access"]
        lines[use_front] = record.getMessage().split(" duration=")[0]
    # The one difference: the front says `Connection: close` when it closes after the reply.
    status, fields, body = seen[True]
    assert (status, fields - {b"Connection: close"}, body) == seen[False], name
    assert lines[True] == lines[False], name


async def test_a_kept_alive_connection_idle_past_the_bound_is_closed(
    front: tuple[LimitedRunner, int],
) -> None:
    _, port = front
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(chat())
    await reply_of(reader)
    assert await asyncio.wait_for(reader.read(), BOUND_S) == b""  # client_idle: 300ms
    writer.close()


async def test_a_slow_body_is_a_408_and_closed(front: tuple[LimitedRunner, int]) -> None:
    _, port = front
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(chat(b"x" * 100)[:-60])
    (status, fields, body) = [await reply_of(reader)][0]
    assert status == "HTTP/1.1 408 Request Timeout" and b"Connection: close" in fields
    assert json.loads(body)["error"]["code"] == "body_timeout"
    assert await asyncio.wait_for(reader.read(), BOUND_S) == b""
    writer.close()


async def test_front_connections_count_toward_the_cap(front: tuple[LimitedRunner, int]) -> None:
    _, port = front
    held = []
    for _ in range(4):
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\n")  # a head in progress
        await writer.drain()
        held.append(writer)
    status, _fields, body = (await exchange(port, chat()))[0]
    assert status == "HTTP/1.1 503 Service Unavailable"
    assert json.loads(body)["error"]["code"] == "too_many_connections"
    for writer in held:
        writer.close()


async def test_the_drain_closes_kept_alive_front_connections() -> None:
    pharos, runner, port = await serving("backends: []\n", front=True)  # client_idle: 30s
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(chat())
        await reply_of(reader)  # served, then kept alive
        await asyncio.wait_for(runner.cleanup(), BOUND_S)
        assert await asyncio.wait_for(reader.read(), BOUND_S) == b""
        writer.close()
    finally:
        await pharos.stop()
