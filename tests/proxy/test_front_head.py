"""proxy/fronthead.parse_head: the plain inference head is the front's; every other head is
None, so aiohttp's parser answers it as before (a CR or LF in a value included: it never
reaches an engine through the front)."""

from __future__ import annotations

import pytest

from pharos.proxy.app import ROUTES
from pharos.proxy.fronthead import MAX_HEADERS, MAX_LINE_BYTES, HeadCache, parse_head

PLAIN = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
    b"Content-Length: 12"
)


def test_the_plain_head_is_parsed_with_names_as_sent() -> None:
    head = parse_head(PLAIN, ROUTES)
    assert head is not None
    assert (head.path, head.path_qs, head.content_length, head.keep_alive) == (
        "/v1/chat/completions",
        "/v1/chat/completions",
        12,
        True,
    )
    assert head.headers[1] == ("Authorization", "Bearer k")
    assert head.get("authorization") == "Bearer k" and head.get("x-api-key") is None


def test_a_query_is_kept_and_connection_close_is_read() -> None:
    head = parse_head(
        PLAIN.replace(b"completions HTTP", b"completions?x=1 HTTP") + b"\r\nConnection: Close",
        ROUTES,
    )
    assert head is not None
    assert (head.path, head.path_qs, head.keep_alive) == (
        "/v1/chat/completions",
        "/v1/chat/completions?x=1",
        False,
    )


HANDED_OFF = {
    "a GET": PLAIN.replace(b"POST", b"GET"),
    "another route": PLAIN.replace(b"/v1/chat/completions", b"/v1/models"),
    "HTTP/1.0": PLAIN.replace(b"HTTP/1.1", b"HTTP/1.0"),
    "HTTP/2": PLAIN.replace(b"HTTP/1.1", b"HTTP/2.0"),
    "no Host": PLAIN.replace(b"Host: x\r\n", b""),
    "no Content-Length": PLAIN.replace(b"\r\nContent-Length: 12", b""),
    "two Content-Lengths": PLAIN + b"\r\nContent-Length: 12",
    "a signed length": PLAIN.replace(b"12", b"+12"),
    "chunked": PLAIN + b"\r\nTransfer-Encoding: chunked",
    "Expect": PLAIN + b"\r\nExpect: 100-continue",
    "Upgrade": PLAIN + b"\r\nUpgrade: h2c",
    "a CR in a value": PLAIN.replace(b"Bearer k", b"Bearer k\rX-Evil: 1"),
    "a LF in a value": PLAIN.replace(b"Bearer k", b"Bearer k\nX-Evil: 1"),
    "a NUL": PLAIN.replace(b"Bearer k", b"Bearer \x00k"),
    "obs-text": PLAIN.replace(b"Bearer k", "Bearer é".encode()),
    "a folded line": PLAIN + b"\r\n continued",
    "a space before the colon": PLAIN.replace(b"Host:", b"Host :"),
    "no colon": PLAIN + b"\r\nnocolon",
    "a fragment": PLAIN.replace(b"completions HTTP", b"completions#f HTTP"),
    "two spaces": PLAIN.replace(b"POST ", b"POST  "),
    "a long line": PLAIN + b"\r\nX-Long: " + b"a" * MAX_LINE_BYTES,
    "too many headers": PLAIN + b"\r\nX-A: 1" * MAX_HEADERS,
}


@pytest.mark.parametrize("head", HANDED_OFF.values(), ids=HANDED_OFF.keys())
def test_anything_but_the_plain_head_goes_to_aiohttp(head: bytes) -> None:
    assert parse_head(head, ROUTES) is None


ANONYMOUS = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12"


def test_the_head_cache_answers_what_parse_head_answers_and_stays_bounded() -> None:
    cache = HeadCache()
    heads = [ANONYMOUS, ANONYMOUS.replace(b"12", b"13"), *HANDED_OFF.values(), PLAIN, ANONYMOUS]
    for head in heads * 2:
        assert cache.parse(head, ROUTES) == parse_head(head, ROUTES)
    assert cache.parse(ANONYMOUS, ROUTES) is cache.parse(ANONYMOUS, ROUTES)  # one Head, a repeat
    for n in range(HeadCache.MAX_HEADS * 3):
        assert cache.parse(ANONYMOUS.replace(b"12", b"%d" % n), ROUTES) is not None
    assert len(cache._heads) <= HeadCache.MAX_HEADS
    long_head = ANONYMOUS + b"\r\nX-Big: " + b"a" * HeadCache.MAX_CACHED_BYTES
    assert cache.parse(long_head, ROUTES) == parse_head(long_head, ROUTES)
    assert long_head not in cache._heads


# the key header     | as the client sends it
KEYED = [
    b"Authorization: Bearer sk-one",
    b"authorization: Basic c2stdHdv",
    b"X-Api-Key: sk-three",
]


@pytest.mark.parametrize("key_line", KEYED)
def test_a_head_carrying_a_client_key_is_parsed_but_never_kept(key_line: bytes) -> None:
    # Keys are held as SHA-256 only: a raw key must not outlive its request in the cache.
    cache = HeadCache()
    head = ANONYMOUS + b"\r\n" + key_line
    assert cache.parse(head, ROUTES) == parse_head(head, ROUTES)
    assert cache.parse(head, ROUTES) is not None
    assert not any(key_line.split(b": ")[1] in kept for kept in cache._heads)
    assert not any(key_line.split(b": ")[1].decode() in str(h) for h in cache._heads.values())
