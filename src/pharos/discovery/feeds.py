"""Opens a backend's log feed by URL scheme; State takes this as its `open_log_feed`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from pharos.discovery.filefeed import open_file_feed


async def open_log_feed(url: str) -> AsyncIterator[bytes]:
    """Raises ValueError for a scheme with no reader yet (docker:// is not built here yet)
    and OSError when the feed cannot be opened; State logs either and retries with backoff."""
    if url.startswith("file:"):
        return await open_file_feed(url)
    raise ValueError(f"log feed {url!r}: unsupported scheme (file:///path is supported)")
