"""The upstream stream's byte loops, in Python and, when built, in C (proxy/_streamc.c).

At c=32 on 10-token vLLM streams the wire's chunk loop and the stream tap's scans for usage
names were ~10% of `pharos serve`'s samples (py-spy): CPython's `bytes.find` reads ~0.7 ns a
byte for each name, glibc's memmem half that, and the chunk loop paid a slice, a check and a
call per chunk. Both builds are checked against each other by
tests/proxy/test_stream_scan.py; PHAROS_PURE_PYTHON=1 runs the Python ones.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import cast

PURE_ENV = "PHAROS_PURE_PYTHON"
_HEX_DIGITS = b"0123456789abcdefABCDEF"

FirstOf = Callable[[bytes, tuple[bytes, ...]], int]
CompleteChunks = Callable[[bytes, int], tuple[bytes, int]]


def python_first_of(data: bytes, needles: tuple[bytes, ...]) -> int:
    """Where the first of `needles` to occur in `data` starts, -1 if none does."""
    found = -1
    for needle in needles:
        at = data.find(needle)
        if at >= 0 and (found < 0 or at < found):
            found = at
    return found


def python_complete_chunks(data: bytes, pos: int) -> tuple[bytes, int]:
    """From `pos` (a chunk's size line), the data of every complete chunk whose size line is 1-8
    hex digits and not 0, with its CRLF after the data, joined; and where the first other thing
    starts (a partial chunk, the last chunk, an extension, broken framing): the wire's own loop
    reads that one as it always did."""
    pieces: list[bytes] = []
    end = len(data)
    while pos < end:
        line_end = data.find(b"\r\n", pos)
        if line_end < 0:
            break
        line = data[pos:line_end]
        if not 0 < len(line) <= 8 or line.translate(None, _HEX_DIGITS):
            break
        size = int(line, 16)
        stop = line_end + 2 + size
        if size == 0 or stop + 2 > end or data[stop : stop + 2] != b"\r\n":
            break
        pieces.append(data[line_end + 2 : stop])
        pos = stop + 2
    return b"".join(pieces), pos


def _load() -> tuple[FirstOf, CompleteChunks | None, str]:
    """The C build's functions; without it the tap scans in Python and the wire keeps its loop."""
    if os.environ.get(PURE_ENV) == "1":
        return python_first_of, None, f"{PURE_ENV}=1"
    try:
        native = importlib.import_module("pharos.proxy._streamc")
    except ImportError as exc:
        return python_first_of, None, f"not built ({exc})"
    return (
        cast(FirstOf, native.first_of),
        cast(CompleteChunks, native.complete_chunks),
        "compiled",
    )


first_of, complete_chunks, NATIVE_REASON = _load()
IMPLEMENTATION = "c" if NATIVE_REASON == "compiled" else "python"
