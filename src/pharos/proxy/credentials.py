"""Upstream credentials on the wire: an aiohttp client middleware that adds a backend's
configured headers to every request Pharos sends under that backend's URL (proxied
requests and the scraper's probes alike), and to no other.

The client's own Authorization / x-api-key never reach an engine (upstream.py drops
them); a redirect to another host gets nothing, because the middleware matches each
request's own URL. Values are never logged: the table's repr shows URLs only.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import ClientHandlerType, ClientMiddlewareType, ClientRequest, ClientResponse
from yarl import URL


class CredentialTable:
    """Immutable; a config reload builds a new one."""

    def __init__(self, by_url: Mapping[str, Mapping[str, str]]) -> None:
        self._by_url = {
            URL(url.rstrip("/")): dict(headers) for url, headers in by_url.items() if headers
        }

    def __repr__(self) -> str:
        return f"CredentialTable({sorted(str(url) for url in self._by_url)})"

    def __bool__(self) -> bool:
        return bool(self._by_url)

    def for_url(self, url: URL) -> Mapping[str, str] | None:
        """The headers of the backend `url` is under (same origin, path prefix; longest wins)."""
        best: tuple[int, Mapping[str, str]] | None = None
        for base, headers in self._by_url.items():
            if url.origin() != base.origin():
                continue
            prefix = base.path.rstrip("/")
            if prefix and not (url.path == prefix or url.path.startswith(prefix + "/")):
                continue
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), headers)
        return None if best is None else best[1]


class CredentialsRef:
    """The table in force: the session's middleware reads it, a config reload swaps it."""

    def __init__(self, table: CredentialTable | None = None) -> None:
        self.table = table if table is not None else CredentialTable({})


def credentials_middleware(ref: CredentialsRef) -> ClientMiddlewareType:
    async def add_credentials(request: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        headers = ref.table.for_url(request.url)
        if headers:
            for name, value in headers.items():
                request.headers[name] = value
        return await handler(request)

    return add_credentials
