"""The front's request-head parser: the plain inference request, or "hand it to aiohttp".

Pure: bytes in, a `Head` out, or None when the head is anything but the plain case the front
serves itself (proxy/front.py): `POST <route>[?query] HTTP/1.1` where the route is one of
the inference routes, a Host, a Content-Length body, no Transfer-Encoding, Expect or
Upgrade, printable ASCII only, and within aiohttp's own limits (8190 bytes a line, 128
headers). HTTP/1.0 goes to aiohttp too (its streams can't be chunked; rare enough). None
is never an error here: aiohttp's parser gets the same bytes and answers exactly as it does
today (its 400s, 413s, 100-continue, chunked bodies), so the front can't widen what passes.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

MAX_LINE_BYTES = 8190
"""aiohttp's max_line_size and max_field_size (its defaults, which Pharos keeps)."""
MAX_HEADERS = 128
"""aiohttp's max_headers."""
MAX_HEAD_BYTES = MAX_LINE_BYTES * (MAX_HEADERS + 1)
"""No head the front serves is longer; a buffer this long without a blank line is aiohttp's."""

HEAD_END = b"\r\n\r\n"
KEY_HEADERS = frozenset({"authorization", "x-api-key"})
"""The headers a client key arrives in (proxy/keys.KeyRing.authenticate_headers reads these)."""
_REFUSED_NAMES = frozenset({"transfer-encoding", "expect", "upgrade"})
_TOKEN_BAD = frozenset(' \t"(),/:;<=>?@[\\]{}')
_CONTROL = bytes(range(0x20)).replace(b"\t", b"") + b"\x7f"


@dataclass(frozen=True, slots=True)
class Head:
    """One plain request head, as the front serves it."""

    method: str
    path: str  # without the query
    path_qs: str  # as the client sent it, query included
    headers: tuple[tuple[str, str], ...]  # in order, names as sent
    content_length: int
    keep_alive: bool  # no `Connection: close`
    first: dict[str, str]  # lower-case name -> its first value (what `get` reads); never written

    def get(self, name: str) -> str | None:
        """The first value of a header, its name matched without case."""
        return self.first.get(name.lower())


def parse_head(head: bytes, routes: Container[str]) -> Head | None:
    """The head up to (not including) its blank line; None: not the front's, aiohttp's."""
    joined = head.replace(b"\r\n", b"")
    if not joined.isascii() or len(joined.translate(None, _CONTROL)) != len(joined):
        return None  # a byte aiohttp decides about (obs-text, a control, a bare CR or LF)
    lines = head.decode("ascii").split("\r\n")
    if len(lines) - 1 > MAX_HEADERS or max(map(len, lines)) > MAX_LINE_BYTES:
        return None
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[0] != "POST" or parts[2] != "HTTP/1.1":
        return None
    target = parts[1]
    path, _, _ = target.partition("?")
    if path not in routes or "#" in target:
        return None
    headers: list[tuple[str, str]] = []
    first: dict[str, str] = {}
    length: int | None = None
    connection = ""
    host = False
    bad = _TOKEN_BAD
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or not bad.isdisjoint(name):  # a token: 1.0 -> 0.1 us a name
            return None
        value = value.strip(" \t")
        key = name.lower()
        if key in _REFUSED_NAMES:
            return None
        if key == "content-length":
            if length is not None or not value.isdigit() or len(value) > 15:
                return None
            length = int(value)
        elif key == "connection":
            connection = value.lower()
        elif key == "host":
            host = True
        headers.append((name, value))
        first.setdefault(key, value)
    if length is None or not host:
        return None  # aiohttp's 400 for a 1.1 request without Host
    keep_alive = "close" not in {token.strip() for token in connection.split(",")}
    return Head("POST", path, target, tuple(headers), length, keep_alive, first)


class HeadCache:
    """parse_head's answers for heads seen before (one per Front: its routes never change).
    A client's requests repeat their head byte for byte but for Content-Length (compare.py's 32
    connections: a handful of heads); a Head is never written, so one serves them all. At most
    MAX_HEADS heads of at most MAX_CACHED_BYTES each (a full cache starts over): 5-8 us a head
    parsed, ~0.2 us found (timeit). A head carrying a client key (KEY_HEADERS) is never kept:
    keys are held as SHA-256 only, and a raw one must not outlive its request here."""

    __slots__ = ("_heads",)

    MAX_HEADS = 64
    MAX_CACHED_BYTES = 2048

    def __init__(self) -> None:
        self._heads: dict[bytes, Head] = {}

    def parse(self, head: bytes, routes: Container[str]) -> Head | None:
        """parse_head(head, routes), for the one `routes` of its Front."""
        found = self._heads.get(head)
        if found is not None:
            return found
        parsed = parse_head(head, routes)
        if (
            parsed is not None
            and len(head) <= self.MAX_CACHED_BYTES
            and KEY_HEADERS.isdisjoint(parsed.first)
        ):
            if len(self._heads) >= self.MAX_HEADS:
                self._heads.clear()
            self._heads[head] = parsed
        return parsed
