"""The upstream client's errors and the parse of an engine reply's head (proxy/wire.py).

Pure: bytes in, fields out, or BadReply; the message never holds the engine's bytes."""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
"""A reply's status line and headers together; aiohttp bounded each line at 8 KiB."""

LENGTH, CHUNKED, TO_CLOSE, NO_BODY = 0, 1, 2, 3
"""How the body is framed: Content-Length bytes, chunked, to the connection's end, none."""


class WireError(Exception):
    """Anything that went wrong on the wire."""


class ConnectFailed(WireError):
    """The connection could not be opened (refused, unreachable, connect timeout, TLS)."""


class ClosedBeforeReply(WireError):
    """The engine closed the connection before a byte of the reply; on a pooled connection
    that is usually a keep-alive the engine timed out (llama-server after long requests)."""


class BadReply(WireError):
    """The reply's head is not HTTP/1.x, or past MAX_HEAD_BYTES, or its framing is unknown."""


class ReplyCut(WireError):
    """The body ended early: the connection closed, or its chunk framing broke."""


class ReadTimeout(WireError, TimeoutError):
    """Nothing came from the engine for the idle bound while Pharos waited for it."""


@dataclass(frozen=True, slots=True)
class Head:
    status: int
    headers: dict[str, str]  # lower-case names; repeated ones joined with ", "
    keep_alive: bool
    mode: int  # LENGTH, CHUNKED, TO_CLOSE or NO_BODY
    length: int  # LENGTH: the body's bytes


def parse_head(head: bytes) -> Head:
    """The status line and headers up to (not including) the blank line. Values are decoded as
    UTF-8, an invalid byte as U+FFFD, so a header passed on to the client always encodes."""
    lines = head.decode("utf-8", "replace").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if (
        version not in ("HTTP/1.1", "HTTP/1.0")
        or len(code) != 3
        or not code.isdigit()
        or rest[3:4] not in ("", " ")
    ):
        raise BadReply("the reply's status line is not HTTP/1.x")
    status = int(code)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or "\n" in line:
            raise BadReply("a reply header line is malformed")
        key = name.lower()
        value = value.strip(" \t")
        if key in headers:
            if key == "content-length" and headers[key] != value:
                raise BadReply("the reply has two different Content-Lengths")
            headers[key] = headers[key] + ", " + value
        else:
            headers[key] = value
    keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if status < 200 or status in (204, 304):
        return Head(status, headers, keep_alive, NO_BODY, 0)
    encoding = headers.get("transfer-encoding")
    if encoding is not None:
        if encoding.lower().replace(" ", "") != "chunked":
            raise BadReply("the reply's Transfer-Encoding is not chunked")
        return Head(status, headers, keep_alive, CHUNKED, 0)
    length = headers.get("content-length")
    if length is None:
        return Head(status, headers, False, TO_CLOSE, 0)
    if not length.isdigit() or len(length) > 15:
        raise BadReply("the reply's Content-Length is not a number")
    return Head(status, headers, keep_alive, LENGTH, int(length))


class HeadCache:
    """parse_head's answers for reply heads seen before, shared by an UpstreamClient's
    connections: an engine's replies repeat their head byte for byte (uvicorn's Date line moves
    once a second). A Head is never written (a connection takes a copy of its headers). At most
    MAX_HEADS heads of at most MAX_CACHED_BYTES each; a full cache starts over. A head that is
    not HTTP raises BadReply every time."""

    __slots__ = ("_heads",)

    MAX_HEADS = 64
    MAX_CACHED_BYTES = 2048

    def __init__(self) -> None:
        self._heads: dict[bytes, Head] = {}

    def parse(self, head: bytes) -> Head:
        found = self._heads.get(head)
        if found is not None:
            return found
        parsed = parse_head(head)
        if len(head) <= self.MAX_CACHED_BYTES:
            if len(self._heads) >= self.MAX_HEADS:
                self._heads.clear()
            self._heads[head] = parsed
        return parsed
