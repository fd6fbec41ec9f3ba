"""Bytes of request bodies held at once are capped (issue 11: 12 concurrent 31 MiB bodies
peaked at 564 MB): past limits.bodies_in_flight_mb a body is a 503 with Retry-After."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest

from pharos.cmd.runtime import Pharos, running
from pharos.config import parse_config
from tests.proxy.test_listener import BOUND_S, connect, reply_of

MIB = 1024 * 1024


@pytest.fixture
async def pharos_and_base() -> AsyncIterator[tuple[Pharos, str]]:
    text = "limits:\n  bodies_in_flight_mb: 1\n  client_body: 10s\nbackends: []\n"
    pharos = Pharos(parse_config(text, "test"))
    async with running(pharos) as base:
        yield pharos, base


def head(length: int) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(length).encode() + b"\r\n\r\n"
    )


async def until(condition: Callable[[], bool], what: str) -> None:
    """Bounded polling on a condition of Pharos's state (no sleep-and-hope)."""
    try:
        async with asyncio.timeout(BOUND_S):
            while not condition():  # noqa: ASYNC110 (a bounded poll of a server-side count)
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(what) from None


async def test_a_body_past_the_budget_is_a_503_and_the_budget_is_given_back(
    pharos_and_base: tuple[Pharos, str],
) -> None:
    pharos, base = pharos_and_base
    budget = pharos.body_budget
    _, slow = await connect(base)
    slow.write(head(800 * 1024) + b'{"model":"m",')  # declared 800 KiB, sent slowly
    await slow.drain()
    await until(lambda: budget.held_bytes == 800 * 1024, "the first body never held bytes")

    reader, writer = await connect(base)
    writer.write(head(400 * 1024) + b"{}")
    await writer.drain()
    status, headers, body = await reply_of(reader)
    assert status == 503 and headers["Retry-After"] == "1"
    assert json.loads(body)["error"]["code"] == "too_busy"
    writer.close()

    slow.close()
    await until(lambda: budget.held_bytes == 0, "the first body's bytes were never given back")
    reader, writer = await connect(base)
    writer.write(head(400 * 1024) + b" " * (400 * 1024))
    await writer.drain()
    status, _, _ = await reply_of(reader)
    assert status == 400  # read whole (the budget had room) and then refused as no model
    writer.close()
