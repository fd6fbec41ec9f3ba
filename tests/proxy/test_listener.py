"""The public listener's bounds on real sockets (issue 11, "Clients" and "Security"): slow
and abusive clients are closed or answered in the API's error shape, and logged without
header values or tracebacks."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import pytest

from pharos.cmd.runtime import Pharos, running
from pharos.config import parse_config

BOUND_S = 5.0  # every wait below ends long before this, or the bound under test is missing
SECRET = "sk-very-secret-header-value"


LIMITED = (
    "limits:\n  client_idle: 300ms\n  client_body: 300ms\n  max_connections: 4\nbackends: []\n"
)


@pytest.fixture
async def base() -> AsyncIterator[str]:
    async with running(Pharos(parse_config(LIMITED, "test"))) as url:
        yield url


async def connect(base: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = base.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def reply_of(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One reply, read by its Content-Length (the server may linger before closing)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    length = int(headers["Content-Length"])
    body = await asyncio.wait_for(reader.readexactly(length), BOUND_S)
    return int(lines[0].split()[1]), headers, body


async def test_a_connection_that_never_finishes_its_headers_is_closed(base: str) -> None:
    reader, writer = await connect(base)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), BOUND_S) == b""
    writer.close()


async def test_a_body_shorter_than_its_content_length_is_a_408(base: str) -> None:
    reader, writer = await connect(base)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n" + b'{"model":"m","messages":[' + b" " * 55
    )
    await writer.drain()
    status, _, body = await reply_of(reader)
    assert status == 408
    assert json.loads(body)["error"]["code"] == "body_timeout"
    writer.close()


async def test_connections_past_the_cap_get_a_503_and_a_log_line(
    base: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pharos.listener")
    await past_the_cap(base)
    assert "refusing client connections" in caplog.text


def test_connections_past_the_cap_get_a_503_on_uvloop_too() -> None:
    """`pharos serve` runs on uvloop, whose transports are no asyncio.Transport."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> None:
        async with running(Pharos(parse_config(LIMITED, "test"))) as url:
            await past_the_cap(url)

    uvloop.run(scenario())


async def past_the_cap(base: str) -> None:
    held = [await connect(base) for _ in range(4)]
    for _, writer in held:  # each sends half a request head, so it counts as open
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        await writer.drain()
    reader, writer = await connect(base)
    status, headers, body = await reply_of(reader)
    assert status == 503 and headers["Retry-After"] == "1"
    assert json.loads(body)["error"]["code"] == "too_many_connections"
    for _, held_writer in held:
        held_writer.close()
    writer.close()


# request bytes,                                                        what aiohttp objects to
MALFORMED_HTTP = [
    (b"GET /healthz HTTP/1.1\r\nAuthorization: Bearer " + SECRET.encode() * 400 + b"\r\n\r\n"),
    (b"GET /healthz HTTP/1.1\r\nX-Bad\x01Header: " + SECRET.encode() + b"\r\n\r\n"),
    (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: x" + SECRET.encode() + b"\r\n\r\n"),
]


@pytest.mark.parametrize("request_bytes", MALFORMED_HTTP)
async def test_malformed_http_is_a_json_400_and_never_logs_the_header(
    base: str, request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader, writer = await connect(base)
    writer.write(request_bytes)
    await writer.drain()
    status, headers, body = await reply_of(reader)
    assert status == 400
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["error"]["code"] == "bad_http_request"
    assert SECRET not in caplog.text
    assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)
    writer.close()
