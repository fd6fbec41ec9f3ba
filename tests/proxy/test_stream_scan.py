"""The stream's byte loops in C (proxy/_streamc.c) and stream_scan.py's Python ones are one
(issue 13): the same answers on any bytes, and the wire and the tap read a stream the same way
whichever runs (PHAROS_PURE_PYTHON=1 runs the Python ones and the wire's own chunk loop)."""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.engine import usage
from pharos.proxy import stream_scan, wire
from pharos.proxy.wire import WireError
from tests.proxy.test_wire_parse import connection, drain, split


def _native() -> types.ModuleType:
    try:
        return importlib.import_module("pharos.proxy._streamc")
    except ImportError:
        if os.environ.get("CI") and (shutil.which("cc") or shutil.which("gcc")):
            pytest.fail("CI has a C compiler but pharos.proxy._streamc was not built")
        pytest.skip("no C build of pharos.proxy._streamc here")


_PIECES = st.sampled_from(
    [b"usage", b"prompt_eval", b"eval_count", b"timings", b"eval", b"usag", b"u", b"\n", b"x"]
)


@settings(max_examples=400)
@given(st.lists(st.one_of(_PIECES, st.binary(max_size=6)), max_size=12))
def test_first_of_finds_where_python_finds(parts: list[bytes]) -> None:
    native = _native()
    data = b"".join(parts)
    earliest = min((at for at in map(data.find, usage.USAGE_MARKERS) if at >= 0), default=-1)
    assert native.first_of(data, usage.USAGE_MARKERS) == earliest
    assert stream_scan.python_first_of(data, usage.USAGE_MARKERS) == earliest
    assert native.first_of(data, (b"", b"x")) == stream_scan.python_first_of(data, (b"", b"x"))


def _chunk(payload: bytes, size_text: bytes | None = None) -> bytes:
    return (size_text if size_text is not None else b"%x" % len(payload)) + b"\r\n" + payload


_CHUNKS = st.lists(
    st.one_of(
        st.binary(min_size=1, max_size=20).map(lambda p: _chunk(p) + b"\r\n"),
        st.binary(min_size=1, max_size=20).map(lambda p: _chunk(p, b"%X" % len(p)) + b"\r\n"),
        st.binary(min_size=1, max_size=9).map(lambda p: _chunk(p, b"0%x" % len(p)) + b"\r\n"),
        st.just(b"0\r\n\r\n"),
        st.just(b"5;ext=1\r\nhello\r\n"),
        st.just(b"3\r\nabcd\r\n"),  # longer than its size line
        st.just(b"0x3\r\nabc\r\n"),
        st.just(b"123456789\r\n"),
        st.just(b"4\r\nab"),  # partial
        st.just(b"a\rb\r\n"),
        st.binary(max_size=5),
    ),
    max_size=8,
)


@settings(max_examples=400)
@given(_CHUNKS, st.integers(min_value=0, max_value=4))
def test_complete_chunks_takes_what_python_takes(chunks: list[bytes], skip: int) -> None:
    native = _native()
    data = b"".join(chunks)
    pos = min(skip, len(data))
    assert native.complete_chunks(data, pos) == stream_scan.python_complete_chunks(data, pos)


_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _read(raw: bytes, cuts: list[int]) -> tuple[bytes, bool, str | None, bool]:
    """What a Connection makes of `raw` in the reads `cuts` split it into."""
    loop = asyncio.new_event_loop()
    try:
        conn, _ = connection(loop)
        for piece in split(raw, cuts):
            conn.data_received(piece)
        body = b""
        error = None
        try:
            body = drain(conn)
        except WireError as exc:
            error = type(exc).__name__
        return body, conn.complete, error, conn.keep_alive
    finally:
        loop.close()


@settings(max_examples=300, deadline=None)
@given(_CHUNKS, st.lists(st.integers(min_value=0, max_value=400), max_size=5))
def test_the_wire_reads_a_chunked_body_the_same_with_the_c_loop_or_without(
    chunks: list[bytes], cuts: list[int]
) -> None:
    _native()
    raw = _HEAD + b"".join(chunks)
    with_c = _read(raw, cuts)
    saved = getattr(wire, "complete_chunks")  # noqa: B009 (not in wire's __all__)
    setattr(wire, "complete_chunks", None)  # noqa: B010 (the wire's own loop alone)
    try:
        without = _read(raw, cuts)
    finally:
        setattr(wire, "complete_chunks", saved)  # noqa: B010
    assert with_c == without
