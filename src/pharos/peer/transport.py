"""How peer messages travel: HTTP on peers.listen in production, in memory in tests.

A transport only moves bytes; the node decides what they mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp

ORIGIN_HEADER = "Pharos-Origin"


@dataclass(frozen=True)
class Reply:
    status: int
    origin: int | None  # the answering instance's Pharos-Origin; None when absent or garbled
    body: bytes | bytearray  # bytearray: a big body is decoded where it was read, uncopied
    parts: tuple[bytes | bytearray | memoryview, ...] = ()
    """A big answer (a snapshot) to write part after part instead of `body`."""

    def payload(self) -> bytes | bytearray:
        """The whole answer as one buffer (in memory, in tests; the HTTP server streams)."""
        return b"".join(self.parts) if self.parts else self.body


class Unreachable(Exception):
    """The peer didn't answer (refused, reset, timed out, or cut off)."""


class Transport(Protocol):
    async def request(
        self,
        address: str,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        timeout_s: float,
    ) -> Reply: ...


def parse_origin(value: str | None) -> int | None:
    if value is None or not value.isdigit():
        return None
    origin = int(value)
    return origin if origin < 2**64 else None


class HttpTransport:
    """aiohttp on a session of its own: peer traffic never shares the upstream pool."""

    def __init__(self, session: aiohttp.ClientSession, max_body_bytes: int) -> None:
        self._session = session
        self._max_body_bytes = max_body_bytes

    async def request(
        self,
        address: str,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        timeout_s: float,
    ) -> Reply:
        try:
            async with self._session.request(
                method,
                f"http://{address}{path}",
                data=body if body else None,
                headers=dict(headers),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as resp:
                data = bytearray()
                async for chunk in resp.content.iter_chunked(1 << 20):
                    data += chunk
                    if len(data) > self._max_body_bytes:
                        raise Unreachable(f"answer over {self._max_body_bytes} bytes")
                return Reply(resp.status, parse_origin(resp.headers.get(ORIGIN_HEADER)), data)
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            raise Unreachable(type(err).__name__) from err


def new_peer_session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, limit_per_host=4),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=2.0),
    )
