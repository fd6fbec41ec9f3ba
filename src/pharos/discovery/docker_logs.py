"""The log feed docker://<container> (spec §4 "The feed").

GET /containers/{id}/logs?follow=1&stdout=1&stderr=1&since=<State.StartedAt>: from the
container's current start, because Ollama prints its server config line once at startup.
Without a TTY the stream is multiplexed into frames with an 8-byte header (stream type,
three zero bytes, big-endian payload length); with one it is raw text with CRLF. Lines are
split per stream (stdout and stderr frames interleave) and handed on without their newline;
they are matched in memory by the follower and never logged here.

The stream ends when the container stops. A follow stream that stays quiet longer than
`idle_check_s` is not dropped: the container is inspected (one bounded request), and the
feed ends only if it no longer runs the same start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import datetime
from typing import Any

import aiohttp

from pharos.discovery.docker_api import DockerApi, DockerError

HEADER_BYTES = 8
MAX_LINE_BYTES = 64 * 1024  # a longer line is dropped, never buffered without bound
IDLE_CHECK_S = 60.0
STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}


class LineSplitter:
    """Bytes in, complete lines out (without \\n or \\r\\n); an over-long line is dropped."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._partial = b""
        self._skipping = False
        self._max = max_line_bytes

    def feed(self, data: bytes) -> list[bytes]:
        pieces = (self._partial + data).split(b"\n")
        self._partial = pieces.pop()
        lines: list[bytes] = []
        for piece in pieces:
            if self._skipping:
                self._skipping = False
                continue
            if len(piece) <= self._max:
                lines.append(piece.removesuffix(b"\r"))
        if len(self._partial) > self._max:
            self._partial = b""
            self._skipping = True
        return lines


class Demuxer:
    """Docker's multiplexed log frames -> lines, split per stream.

    Frames may arrive cut anywhere (a read returns what the socket had); a header that isn't
    one (a type other than 0-2, or nonzero padding) means the stream is not multiplexed, and
    DockerError ends the feed rather than matching probes on garbage."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self._need: int | None = None  # payload bytes still to read of the current frame
        self._stream = 1
        self._splitters = {stream: LineSplitter(max_line_bytes) for stream in STREAM_NAMES}

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer.extend(data)
        lines: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buffer) < HEADER_BYTES:
                    return lines
                header = bytes(self._buffer[:HEADER_BYTES])
                del self._buffer[:HEADER_BYTES]
                if header[0] not in STREAM_NAMES or header[1:4] != b"\x00\x00\x00":
                    raise DockerError("log stream: not a multiplexed frame header")
                self._stream = header[0]
                self._need = int.from_bytes(header[4:8], "big")
            if self._need > 0:
                if not self._buffer:
                    return lines
                take = min(self._need, len(self._buffer))
                chunk = bytes(self._buffer[:take])
                del self._buffer[:take]
                self._need -= take
                lines.extend(self._splitters[self._stream].feed(chunk))
                if self._need > 0:
                    return lines
            self._need = None


def started_at_since(started_at: str) -> str:
    """RFC 3339 with nanoseconds (State.StartedAt) -> the `since` value: Unix seconds with
    the nanoseconds kept exactly, so the previous run's last lines are not read again."""
    text = started_at.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    fraction = "000000000"
    if "." in text:
        head, rest = text.split(".", 1)
        digits = ""
        for char in rest:
            if not char.isdigit():
                break
            digits += char
        fraction = (digits or "0")[:9].ljust(9, "0")
        text = head + rest[len(digits) :]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise DockerError(f"State.StartedAt {started_at!r} is not a timestamp") from None
    if moment.tzinfo is None:
        raise DockerError(f"State.StartedAt {started_at!r} has no zone")
    return f"{int(moment.timestamp())}.{fraction}"


def _running_start(inspected: dict[str, Any]) -> tuple[str, bool]:
    """(StartedAt, TTY) of a running container; DockerError when it isn't running."""
    state = inspected.get("State")
    if not isinstance(state, dict) or state.get("Running") is not True:
        raise DockerError("the container is not running")
    started = state.get("StartedAt")
    if not isinstance(started, str):
        raise DockerError("the container reports no State.StartedAt")
    config = inspected.get("Config")
    tty = isinstance(config, dict) and config.get("Tty") is True
    return started, tty


class DockerLogFeed:
    """Async iterator of one container run's log lines; ends when that run ends."""

    def __init__(
        self,
        api: DockerApi,
        container: str,
        response: aiohttp.ClientResponse,
        *,
        started_at: str,
        tty: bool,
        idle_check_s: float = IDLE_CHECK_S,
        owns_api: bool = False,
    ) -> None:
        self._api = api
        self._container = container
        self._response: aiohttp.ClientResponse | None = response
        self._started_at = started_at
        self._idle_check_s = idle_check_s
        self._owns_api = owns_api
        self._decoder: Demuxer | LineSplitter = LineSplitter() if tty else Demuxer()
        self._lines: deque[bytes] = deque()

    @classmethod
    async def open(
        cls,
        api: DockerApi,
        container: str,
        *,
        idle_check_s: float = IDLE_CHECK_S,
        owns_api: bool = False,
    ) -> DockerLogFeed:
        if api.version is None:
            await api.connect()
        inspected = await api.inspect(container)
        started_at, tty = _running_start(inspected)
        container_id = str(inspected.get("Id") or container)
        response = await api.open_stream(
            f"/containers/{container_id}/logs",
            {
                "follow": "1",
                "stdout": "1",
                "stderr": "1",
                "since": started_at_since(started_at),
            },
        )
        return cls(
            api,
            container_id,
            response,
            started_at=started_at,
            tty=tty,
            idle_check_s=idle_check_s,
            owns_api=owns_api,
        )

    def __aiter__(self) -> DockerLogFeed:
        return self

    async def _still_same_run(self) -> bool:
        try:
            started_at, _ = _running_start(await self._api.inspect(self._container))
        except DockerError:
            return False
        return started_at == self._started_at

    async def __anext__(self) -> bytes:
        while not self._lines:
            response = self._response
            if response is None:
                raise StopAsyncIteration
            try:
                async with asyncio.timeout(self._idle_check_s):
                    data = await response.content.readany()
            except TimeoutError:
                if await self._still_same_run():
                    continue
                await self.aclose()
                raise StopAsyncIteration from None
            except aiohttp.ClientError as error:
                await self.aclose()
                raise DockerError(f"log stream: {type(error).__name__}") from None
            if not data:
                await self.aclose()
                raise StopAsyncIteration
            self._lines.extend(self._decoder.feed(data))
        return self._lines.popleft()

    async def aclose(self) -> None:
        response, self._response = self._response, None
        if response is not None:
            response.close()
        if self._owns_api:
            with contextlib.suppress(Exception):
                await self._api.close()


def container_of_feed(url: str) -> str:
    """docker://ollama-1 -> ollama-1; ValueError when it names no container."""
    if not url.startswith("docker://"):
        raise ValueError(f"log feed {url!r}: not a docker:// URL")
    name = url.removeprefix("docker://").strip("/")
    if not name or "/" in name:
        raise ValueError(f"log feed {url!r}: write docker://<container name or id>")
    return name


async def open_docker_feed(url: str, api: DockerApi | None = None) -> DockerLogFeed:
    """Open docker://<container>; without an api, one from DOCKER_HOST that the feed owns."""
    container = container_of_feed(url)
    owns = api is None
    if api is None:
        api = DockerApi.from_environment()
        if api is None:
            raise ValueError(f"log feed {url!r}: DOCKER_HOST is not a unix:// socket")
    try:
        return await DockerLogFeed.open(api, container, owns_api=owns)
    except BaseException:
        if owns:
            await api.close()
        raise
