"""The stream tap (spec §9 "Tap" and "Usage on every stream").

Upstream bytes pass through as they arrive; the tap only watches complete lines
for usage and remembers the last one that carried it. When Pharos itself added
`stream_options.include_usage`, the tap also drops the usage-only chunk (the
`data:` line whose `choices` is an empty list) and the blank line that ends its
event, so the client gets the stream it asked for. Only then does it hold a
partial line until its newline; engines write whole events, so that costs no
latency in practice.
"""

from __future__ import annotations

from pharos.engine.usage import (
    USAGE_MARKERS,
    Usage,
    decode_line,
    merge_usage,
    usage_of,
)
from pharos.proxy.rename import ReplyRename
from pharos.proxy.stream_scan import first_of

MAX_LINE_BYTES = 64 * 1024
"""Longer lines pass through unparsed (a huge one-line non-streamed reply gives no usage)."""

_NL = b"\n"
_NL_BYTE = 0x0A
_DATA = b"data:"


class StreamTap:
    def __init__(
        self, *, strip_usage_chunk: bool = False, rename: ReplyRename | None = None
    ) -> None:
        self._rename = rename  # the client's model name in the bytes written (rename.py)
        self._strip = strip_usage_chunk
        self._partial = bytearray()  # the current line so far (bounded by MAX_LINE_BYTES)
        self._overlong = False  # the current line passed MAX_LINE_BYTES: never parsed
        self._drop_blank = False  # the usage chunk was dropped: drop the blank line ending it
        self._usage: Usage | None = None

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def feed(self, chunk: bytes) -> bytes:
        """Returns the bytes to write to the client now."""
        if self._rename is not None:
            return self._rename.feed(self._feed(chunk))
        return self._feed(chunk)

    def _feed(self, chunk: bytes) -> bytes:
        if not chunk:
            return b""
        if not self._partial and not self._overlong and not self._drop_blank:
            # No line in progress: the lines before the first usage name are passed on
            # unread. An engine's reads hold many events (13 per 10-token vLLM stream in 2
            # reads at c=32): the usage chunk's read was split into lines, all of them. Every
            # read takes one scan for the four names (stream_scan.first_of: C's memmem).
            marker = first_of(chunk, USAGE_MARKERS)
            if marker < 0 and chunk[-1] == _NL_BYTE:
                return chunk  # whole lines, none can carry usage: nothing to parse, hold or drop
            if marker > 0:
                start = chunk.rfind(_NL, 0, marker) + 1
                if start > 0:
                    if self._strip:
                        return chunk[:start] + self._feed_stripping(chunk[start:])
                    self._scan(chunk[start:])
                    return chunk
        if self._strip:
            return self._feed_stripping(chunk)
        self._scan(chunk)
        return chunk

    def finish(self) -> tuple[bytes, Usage | None]:
        """The bytes still held (an unterminated last line) and the last usage seen."""
        rest = bytes(self._partial) if self._strip else b""
        if self._rename is not None:
            rest = self._rename.feed(rest) + self._rename.finish()
        if self._partial and not self._overlong:
            self._remember(bytes(self._partial))
        self._partial.clear()
        self._overlong = False
        return rest, self._usage

    def _scan(self, chunk: bytes) -> None:
        """Pass-through mode: watch complete lines, keep at most one bounded partial."""
        start = 0
        while True:
            end = chunk.find(_NL, start)
            if end < 0:
                self._extend(chunk[start:])
                return
            if self._partial or self._overlong:
                self._extend(chunk[start:end])
                if not self._overlong:
                    self._remember(bytes(self._partial))
                self._partial.clear()
                self._overlong = False
            elif end - start <= MAX_LINE_BYTES:
                self._remember(chunk[start:end])
            start = end + 1

    def _extend(self, piece: bytes) -> None:
        if self._overlong:
            return
        if len(self._partial) + len(piece) > MAX_LINE_BYTES:
            self._partial.clear()
            self._overlong = True
            return
        self._partial += piece

    def _feed_stripping(self, chunk: bytes) -> bytes:
        out = bytearray()
        start = 0
        while True:
            end = chunk.find(_NL, start)
            if end < 0:
                self._hold(chunk[start:], out)
                return bytes(out)
            piece = chunk[start : end + 1]
            start = end + 1
            if self._overlong:
                out += piece  # the rest of a line too long to parse
                self._overlong = False
                continue
            if self._partial:
                self._partial += piece
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = piece
            if not self._keep(line):
                continue
            out += line

    def _hold(self, piece: bytes, out: bytearray) -> None:
        if self._overlong:
            out += piece
            return
        self._partial += piece
        if len(self._partial) > MAX_LINE_BYTES:
            out += self._partial  # too long to be a usage chunk: stop holding it
            self._partial.clear()
            self._overlong = True

    def _keep(self, line: bytes) -> bool:
        """False for the usage-only chunk and the blank line that ends its event."""
        if self._drop_blank:
            self._drop_blank = False
            if line.strip() == b"":
                return False
        if len(line) > MAX_LINE_BYTES + 2 or first_of(line, USAGE_MARKERS) < 0:
            return True
        reply = decode_line(line)
        if reply is None:
            return True
        usage = usage_of(reply)
        if usage is not None:
            self._usage = merge_usage(self._usage, usage)
        if usage is not None and line.startswith(_DATA) and reply.get("choices") == []:
            self._drop_blank = True
            return False
        return True

    def _remember(self, line: bytes) -> None:
        if first_of(line, USAGE_MARKERS) < 0:  # may_carry_usage in one scan
            return
        reply = decode_line(line)
        if reply is None:
            return
        usage = usage_of(reply)
        if usage is not None:
            self._usage = merge_usage(self._usage, usage)
