"""read_body reads a body that arrived whole with its head at once (issue 13: 25 -> 3 µs for a
32 KiB chat, no timer), and one still arriving chunk by chunk; both keep every bound."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from pharos.proxy.bodies import BodyBudget, read_body
from pharos.proxy.errors import ClientError
from tests.proxy.test_listener import BOUND_S, connect, reply_of

MAX_BYTES = 64 * 1024
BUDGET_BYTES = 1024 * 1024


@pytest.fixture
async def app_and_base() -> AsyncIterator[tuple[BodyBudget, str]]:
    """A handler that answers the sha256 of the body read_body gave it, or the error's status."""
    budget = BodyBudget(BUDGET_BYTES)

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            body = await read_body(request, max_bytes=MAX_BYTES, timeout_s=BOUND_S)
        except ClientError as err:
            return web.Response(status=err.status, text=err.message)
        return web.Response(text=hashlib.sha256(body).hexdigest())

    app = web.Application(middlewares=[budget.middleware])
    app.router.add_post("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield budget, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _chunked(body: bytes, pieces: int) -> list[bytes]:
    size = max(1, len(body) // pieces)
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return [f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts] + [b"0\r\n\r\n"]


HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


# framing       | body bytes      | sent in one write | expected status
CASES = [
    ("length", 32 * 1024, True, 200),  # the benchmark's chat, whole with its head
    ("length", 32 * 1024, False, 200),  # the same, the body after the head arrived
    ("chunked", 32 * 1024, True, 200),
    ("chunked", 32 * 1024, False, 200),
    ("chunked", MAX_BYTES + 1, True, 413),  # no Content-Length to refuse it by: counted as read
    ("chunked", MAX_BYTES + 1, False, 413),
    ("length", 0, True, 200),
]


@pytest.mark.parametrize(("framing", "size", "whole", "expected"), CASES)
async def test_a_body_whole_or_in_pieces_reads_the_same_and_keeps_its_bounds(
    app_and_base: tuple[BodyBudget, str], framing: str, size: int, whole: bool, expected: int
) -> None:
    budget, base = app_and_base
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    if framing == "length":
        parts = [HEAD + f"Content-Length: {size}\r\n\r\n".encode(), body]
    else:
        parts = [HEAD + b"Transfer-Encoding: chunked\r\n\r\n", *_chunked(body, 4)]
    reader, writer = await connect(base)
    if whole:
        writer.write(b"".join(parts))
    else:
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0)  # a loop turn between pieces: the handler may start meanwhile
    await writer.drain()
    status, _, reply = await reply_of(reader)
    writer.close()
    assert status == expected
    if expected == 200:
        assert reply.decode() == hashlib.sha256(body).hexdigest()
    assert budget.held_bytes == 0  # given back whichever way it was read


async def test_a_client_that_waits_for_100_continue_sends_its_body_after_and_it_is_read_whole(
    app_and_base: tuple[BodyBudget, str],
) -> None:
    """curl sends `Expect: 100-continue` before a large body: nothing of the body is there when
    the handler starts, so it is read as it arrives."""
    budget, base = app_and_base
    body = b'{"model":"m","messages":[' + b'{"role":"user","content":"x"},' * 1000 + b"{}]}"
    reader, writer = await connect(base)
    writer.write(HEAD + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode())
    await writer.drain()
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    writer.write(body)
    await writer.drain()
    status, _, reply = await reply_of(reader)
    writer.close()
    assert status == 200
    assert reply.decode() == hashlib.sha256(body).hexdigest()
    assert budget.held_bytes == 0
