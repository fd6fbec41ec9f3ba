"""The proxy's upstream client: keep-alive connections per engine origin (proxy/wire.py), the
request head built once, the backend's credentials added, and the one retry a stale pooled
connection earns.

No cap on connections: the scheduler's leases already bound what each target gets, and a
pool cap below that made requests wait for a connection unseen (issue 11). A pooled
connection the engine closed fails before any byte of the reply (llama-server closes
keep-alives after long requests): that request goes once more on a new connection, never on
the next pooled one, which a burst may have left closed as well (a 503 in CI, once).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from yarl import URL

from pharos.proxy.credentials import CredentialsRef, CredentialTable
from pharos.proxy.wire import (
    MAX_REFUSAL_BYTES,
    BadReply,
    ClosedBeforeReply,
    ConnectFailed,
    Connection,
)
from pharos.proxy.wirehead import HeadCache

KEEPALIVE_S = 15.0
"""An idle pooled connection older than this is closed, not reused (aiohttp's default)."""
MAX_IDLE_PER_ORIGIN = 256


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int
    host_header: str

    @property
    def key(self) -> str:
        return f"{self.scheme}://{self.host_header}"


def origin_of(url: URL) -> Origin:
    if url.scheme not in ("http", "https") or url.host is None:
        raise ConnectFailed(f"not an http(s) URL: {url.scheme}://")
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    host = url.host
    shown = f"[{host}]" if ":" in host else host
    default = port == (443 if url.scheme == "https" else 80)
    return Origin(url.scheme, host, port, shown if default else f"{shown}:{port}")


def _breaks_line(text: str) -> bool:
    """A header name or value that would end its line early (a header of its own)."""
    return "\r" in text or "\n" in text


class Reply:
    """An engine's reply: status and headers (lower-case names) at once, the body as it
    comes. `release()` hands the connection back when the body was read to its end, else
    closes it; `close()` always closes it (the client left, the body won't be read)."""

    __slots__ = ("_client", "_conn", "headers", "status")

    def __init__(self, client: UpstreamClient, conn: Connection) -> None:
        self._client = client
        self._conn = conn
        self.status = conn.status
        self.headers: Mapping[str, str] = conn.headers

    def read_nowait(self) -> bytes:
        return self._conn.take()

    def ended(self) -> bool:
        """Every byte of the body was read: the last read needs no next_chunk after it."""
        return self._conn.ended()

    async def next_chunk(self) -> bytes:
        """The next bytes of the body, b"" at its end (ReplyCut, ReadTimeout)."""
        return await self._conn.next_chunk()

    async def read(self) -> bytes:
        """The whole body (a refusal's), bounded by MAX_REFUSAL_BYTES."""
        pieces: list[bytes] = []
        size = 0
        while True:
            piece = await self._conn.next_chunk()
            if not piece:
                return b"".join(pieces)
            size += len(piece)
            if size > MAX_REFUSAL_BYTES:
                self.close()
                raise BadReply(f"a refusal's body passed {MAX_REFUSAL_BYTES} bytes")
            pieces.append(piece)

    def release(self) -> None:
        self._client.give_back(self._conn)

    def close(self) -> None:
        self._conn.close()


class UpstreamClient:
    """Owns every pooled connection (state: the pool, the credentials cache)."""

    def __init__(
        self,
        credentials: CredentialsRef | None = None,
        *,
        connect_s: float = 10.0,
        keepalive_s: float = KEEPALIVE_S,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`ssl_context`: how https backends are verified (default: the system's CAs)."""
        self._credentials = credentials if credentials is not None else CredentialsRef()
        self._connect_s = connect_s
        self._keepalive_s = keepalive_s
        self._idle: dict[str, list[Connection]] = {}
        self._origins: dict[str, tuple[Origin, str]] = {}  # url base -> (origin, path prefix)
        self._cred_table: CredentialTable | None = None
        self._cred_cache: dict[str, bytes] = {}
        self._ssl = ssl_context
        self._heads = HeadCache()  # the engines' reply heads, parsed once each
        self._closed = False

    async def post(
        self,
        base_url: str,
        path_qs: str,
        body: bytes,
        headers: Iterable[tuple[str, str]],
        *,
        idle_s: float,
    ) -> Reply:
        """POST to `base_url` + `path_qs` until the reply's head. Raises ConnectFailed,
        ClosedBeforeReply (also after the retry on a new connection), BadReply, ReadTimeout."""
        origin, prefix = self._origin(base_url)
        head = self._head(origin, prefix + path_qs, body, headers)
        conn = self._pooled(origin.key)
        if conn is None:
            conn = await self._connect(origin)
        try:
            return await self._exchange(conn, head, body, idle_s)
        except ClosedBeforeReply:
            pass
        conn = await self._connect(origin)
        return await self._exchange(conn, head, body, idle_s)

    async def _exchange(self, conn: Connection, head: bytes, body: bytes, idle_s: float) -> Reply:
        try:
            conn.send(head, body, idle_s)
            await conn.wait_head()
        except BaseException:
            conn.close()  # the client left, or the reply broke: never reused
            raise
        return Reply(self, conn)

    # ---- the request's head -----------------------------------------------------------

    def _origin(self, base_url: str) -> tuple[Origin, str]:
        found = self._origins.get(base_url)
        if found is None:
            url = URL(base_url)
            found = (origin_of(url), url.path.rstrip("/"))
            if len(self._origins) > 4096:
                self._origins.clear()
            self._origins[base_url] = found
        return found

    def _credential_lines(self, origin: Origin, path: str) -> bytes:
        table = self._credentials.table
        if table is not self._cred_table:
            self._cred_table = table
            self._cred_cache = {}
        key = origin.key + path
        lines = self._cred_cache.get(key)
        if lines is None:
            found = table.for_url(URL(key)) if table else None
            lines = b"".join(
                f"{name}: {value}\r\n".encode("utf-8", "surrogateescape")
                for name, value in (found or {}).items()
                if not _breaks_line(name) and not _breaks_line(value)
            )
            if len(self._cred_cache) > 4096:
                self._cred_cache.clear()
            self._cred_cache[key] = lines
        return lines

    def _head(
        self,
        origin: Origin,
        target: str,
        body: bytes,
        headers: Iterable[tuple[str, str]],
    ) -> bytes:
        """The request line and headers as aiohttp sent them: Host, the client's headers,
        Content-Type and Accept when the client sent none, Content-Length; no
        Accept-Encoding (replies pass through undecoded)."""
        parts = [f"POST {target} HTTP/1.1\r\nHost: {origin.host_header}\r\n"]
        typed = accepts = False
        for name, value in headers:
            if _breaks_line(value) or _breaks_line(name):
                continue
            lower = name.lower()
            if lower == "content-type":
                typed = True
            elif lower == "accept":
                accepts = True
            parts.append(f"{name}: {value}\r\n")
        if not typed:
            parts.append("Content-Type: application/octet-stream\r\n")
        if not accepts:
            parts.append("Accept: */*\r\n")
        path = target.partition("?")[0]
        credentials = self._credential_lines(origin, path)
        parts.append(f"Content-Length: {len(body)}\r\n")
        return "".join(parts).encode("utf-8", "surrogateescape") + credentials + b"\r\n"

    # ---- connections --------------------------------------------------------------------

    def _pooled(self, key: str) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = idle[-1].loop_time()  # not asyncio.get_running_loop(): a getpid syscall each
        while idle:
            conn = idle.pop()
            if conn.reusable() and now - conn.idle_since_s < self._keepalive_s:
                conn.reused = True
                conn.reset()
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin) -> Connection:
        loop = asyncio.get_running_loop()
        ssl_context = None
        if origin.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            ssl_context = self._ssl
        try:
            async with asyncio.timeout(self._connect_s):
                _, conn = await loop.create_connection(
                    lambda: Connection(loop, origin.key, self._heads),
                    origin.host,
                    origin.port,
                    ssl=ssl_context,
                    server_hostname=origin.host if ssl_context is not None else None,
                )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise ConnectFailed(f"connect to {origin.key} failed: {type(exc).__name__}") from None
        return conn

    def give_back(self, conn: Connection) -> None:
        if self._closed or not conn.reusable():
            conn.close()
            return
        idle = self._idle.setdefault(conn.origin, [])
        if len(idle) >= MAX_IDLE_PER_ORIGIN:
            conn.close()
            return
        conn.idle_since_s = conn.loop_time()
        idle.append(conn)

    def idle_connections(self) -> int:
        return sum(len(conns) for conns in self._idle.values())

    async def close(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
