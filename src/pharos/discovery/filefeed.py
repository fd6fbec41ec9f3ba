"""A log feed read from a file (`logs: file:///path`, spec §4 Log probes).

The file is read from its start, then followed by polling once a second. When it is replaced
(another inode at the path, or none) or truncated, the feed ends: its values belong to the
engine process that wrote it, and the follower reopens the path and starts over. Every disk
access runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import BinaryIO
from urllib.parse import unquote, urlparse

SleepFn = Callable[[float], Awaitable[None]]

READ_CHUNK_BYTES = 1 << 20
MAX_LINE_BYTES = 64 * 1024  # a longer line is dropped, never buffered without bound


def file_feed_path(url: str) -> str:
    """`file:///var/log/ollama.log` -> `/var/log/ollama.log`; ValueError for anything else."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ValueError(f"log feed {url!r}: not a file:// URL")
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"log feed {url!r}: a file feed names a local path (file:///path)")
    path = unquote(parsed.path)
    if not path.startswith("/"):
        raise ValueError(f"log feed {url!r}: the path must be absolute (file:///path)")
    return path


class FileFeed:
    """Async iterator of the file's lines (without the newline); ends when the file is gone."""

    def __init__(
        self,
        path: str,
        handle: BinaryIO,
        *,
        poll_s: float = 1.0,
        sleep: SleepFn = asyncio.sleep,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._path = path
        self._handle: BinaryIO | None = handle
        self._poll_s = poll_s
        self._sleep = sleep
        self._max_line_bytes = max_line_bytes
        self._offset = 0
        self._partial = b""
        self._skipping_long_line = False
        self._lines: deque[bytes] = deque()
        self._ended = False

    @classmethod
    async def open(
        cls, path: str, *, poll_s: float = 1.0, sleep: SleepFn = asyncio.sleep
    ) -> FileFeed:
        handle = await asyncio.to_thread(open, path, "rb")
        return cls(path, handle, poll_s=poll_s, sleep=sleep)

    def _read_step(self) -> bytes | None:
        """Runs in a thread: new bytes (maybe empty), or None when the file was replaced or
        truncated."""
        handle = self._handle
        if handle is None:
            return None
        try:
            at_path = os.stat(self._path)
        except OSError:
            return None
        opened = os.fstat(handle.fileno())
        if (at_path.st_dev, at_path.st_ino) != (opened.st_dev, opened.st_ino):
            return None
        if opened.st_size < self._offset:
            return None
        data = handle.read(READ_CHUNK_BYTES)
        self._offset += len(data)
        return data

    def _split(self, data: bytes) -> list[bytes]:
        pieces = (self._partial + data).split(b"\n")
        self._partial = pieces.pop()
        lines: list[bytes] = []
        for piece in pieces:
            if self._skipping_long_line:
                self._skipping_long_line = False
                continue
            if len(piece) <= self._max_line_bytes:
                lines.append(piece.removesuffix(b"\r"))
        if len(self._partial) > self._max_line_bytes:
            self._partial = b""
            self._skipping_long_line = True
        return lines

    async def poll(self) -> list[bytes] | None:
        """Read what was appended since the last poll: its complete lines, or None if the
        file is gone (replaced or truncated)."""
        if self._ended:
            return None
        data = await asyncio.to_thread(self._read_step)
        if data is None:
            self._ended = True
            return None
        return self._split(data)

    def __aiter__(self) -> FileFeed:
        return self

    async def __anext__(self) -> bytes:
        while not self._lines:
            lines = await self.poll()
            if lines is None:
                raise StopAsyncIteration
            if lines:
                self._lines.extend(lines)
            else:
                await self._sleep(self._poll_s)
        return self._lines.popleft()

    async def aclose(self) -> None:
        self._ended = True
        handle, self._handle = self._handle, None
        if handle is not None:
            await asyncio.to_thread(handle.close)


async def open_file_feed(
    url: str, *, poll_s: float = 1.0, sleep: SleepFn = asyncio.sleep
) -> FileFeed:
    return await FileFeed.open(file_feed_path(url), poll_s=poll_s, sleep=sleep)
