"""Replies carry the name the client asked for, not the engine's (spec §4 aliases).

vLLM answers with its --served-model-name and llama.cpp with its --alias (b11312, checked
live: asked `my-alias`, it replied `"model":"smollm2"`), so a client that asked for an
alias saw another name in every reply. The rewrite works on bytes: the compact
`"model":"<engine name>"` every recorded engine writes (and the `"model": "..."` form),
streamed or not. Only a chunk that ends inside that pattern holds its tail back until
the next chunk; engines end events with a newline, so a stream is never delayed.
"""

from __future__ import annotations

import msgspec


class ReplyRename:
    def __init__(self, engine_name: str, client_name: str) -> None:
        engine = msgspec.json.encode(engine_name)
        client = msgspec.json.encode(client_name)
        self._pairs = [
            (b'"model":' + engine, b'"model":' + client),
            (b'"model": ' + engine, b'"model": ' + client),
        ]
        self._longest = max(len(old) for old, _ in self._pairs)
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._held + chunk if self._held else chunk
        self._held = b""
        if b'"model"' in data:
            for old, new in self._pairs:
                data = data.replace(old, new)
        keep = self._partial_tail(data)
        if keep:
            self._held = data[-keep:]
            data = data[:-keep]
        return data

    def finish(self) -> bytes:
        rest, self._held = self._held, b""
        return rest

    def _partial_tail(self, data: bytes) -> int:
        """How many trailing bytes could begin a pattern (0 in practice: events end in \\n)."""
        tail = data[-(self._longest - 1) :]
        at = tail.find(b'"')
        while at >= 0:  # the longest candidate first
            piece = tail[at:]
            if any(old.startswith(piece) and old != piece for old, _ in self._pairs):
                return len(piece)
            at = tail.find(b'"', at + 1)
        return 0
