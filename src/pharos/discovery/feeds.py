"""Opens a backend's log feed by URL scheme; State takes this as its `open_log_feed`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from pharos.discovery.docker_api import DockerApi
from pharos.discovery.docker_logs import open_docker_feed
from pharos.discovery.filefeed import open_file_feed


async def open_log_feed(url: str, docker: DockerApi | None = None) -> AsyncIterator[bytes]:
    """file:///path or docker://<container> (through `docker`, else DOCKER_HOST's socket).
    Raises ValueError for another scheme and OSError when the feed cannot be opened; State
    logs either and retries with backoff."""
    if url.startswith("file:"):
        return await open_file_feed(url)
    if url.startswith("docker:"):
        return await open_docker_feed(url, docker)
    raise ValueError(
        f"log feed {url!r}: unsupported scheme (file:///path and docker://container are)"
    )
