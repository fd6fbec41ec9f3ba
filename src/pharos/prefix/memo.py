"""The chain memo: the links and bodies of the last few chats, so a chat client's next turn,
which repeats the whole conversation, is neither decoded nor hashed again where it repeats an
earlier body byte for byte (issue 13). Used only with the C build (prefix/_chainc.c); the links
it gives are the ones prefix/chain.py computes without it.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from pharos.prefix.chain import _KIND_CHAT, MemoEntry, _message_ends, _root, _shared_prefix

Kept = tuple[bytes, int, tuple[int, ...], tuple[object, ...]]
"""A kept chat body: (its bytes, the offset after its messages' `[`, each message's end offset,
its decoded message Structs)."""


class Cut(NamedTuple):
    """A body with the messages a kept body repeats byte for byte cut out (`body`: all but them),
    `messages`: the kept Structs for them, `first` and `ends` as Kept's, for the whole body. A
    NamedTuple: one a chat request, and a frozen dataclass's __init__ took ~1.5 us of it."""

    body: bytes
    messages: tuple[object, ...]
    first: int
    ends: tuple[int, ...]
    source: Kept | None  # the kept body it repeats whole (the new one replaces it), else None


class ChainMemo:
    """The links of the last few chats, for the messages a new chat repeats byte for byte: a
    chat client sends the whole conversation again on every turn, so its next request repeats
    all but the newest messages (compare.py's 32 KiB chats: 193 of 194). The C build compares
    their raw bytes (memcmp) instead of unescaping and hashing them again; the links are the
    ones it would have computed, so routing never depends on what the memo held.

    It keeps the bodies too, with where each message ends (`cut`): a body sharing its leading
    bytes with a kept one up to a message end is decoded without those messages, and takes the
    kept Structs for them (32 KiB chat: parse_request 94 -> 40 us).

    A chat's entry keeps its body alive (its raw contents are slices of it) and, per message, a
    decoded Struct, a digest and two links: counted as ENTRY_BYTES_PER_MESSAGE more than the body,
    an entry holds at most `max_entry_bytes`. A cut chat's entry holds its body, the body its first
    messages were decoded from and copies of its new contents: at most 3 x `max_entry_bytes`, the
    memo at most `entries` of them (24 MiB). It holds prompts: never log what it keeps. One per
    Proxy; not for use across threads."""

    __slots__ = (
        "_bodies",
        "_entries",
        "_last_cut",
        "_last_root",
        "_max_entries",
        "_max_entry_bytes",
        "_shared",
        "_writes",
    )

    ENTRY_BYTES_PER_MESSAGE = 160
    """A kept message: its Struct and Raw (~100 bytes), its digest (32) and two ints in tuples."""

    def __init__(self, entries: int = 8, max_entry_bytes: int = 1 << 20) -> None:
        if entries < 1:
            raise ValueError(f"a chain memo needs at least 1 entry, got {entries}")
        self._entries: list[MemoEntry] = []
        self._bodies: list[Kept] = []
        self._shared: list[int] = []  # per kept body, its leading bytes shared with the first; -1
        self._writes = 0  # remember() calls that changed the kept bodies
        self._last_cut: tuple[bytes, list[int], int] | None = None  # body, shared_with_kept, writes
        self._last_root: tuple[str, bytes | None, bytes] | None = None  # model, tools, chat h0
        self._max_entries = entries
        self._max_entry_bytes = max_entry_bytes

    def __len__(self) -> int:
        return len(self._entries)

    def takes(self, body_bytes: int, messages: int) -> bool:
        """Whether a chat of this body and this many messages may be kept."""
        return body_bytes + messages * self.ENTRY_BYTES_PER_MESSAGE <= self._max_entry_bytes

    @property
    def entries(self) -> list[MemoEntry]:
        """Most recent first; message_links reads them and never writes."""
        return self._entries

    def keep(self, entry: MemoEntry, reused: MemoEntry | None, reused_links: int) -> None:
        """The new chat's entry first; the one it repeated whole goes (the new one holds it)."""
        entries = self._entries
        if reused is not None and reused_links == len(reused[4]):
            entries.remove(reused)
        entries.insert(0, entry)
        del entries[self._max_entries :]

    def cut(self, body: bytes) -> Cut | None:
        """`body` without the leading messages the kept body sharing the most repeats, or None
        (no kept body shares a whole message, or the body is not a plain chat object)."""
        if _shared_prefix is None or _message_ends is None:
            return None
        best: Kept | None = None
        best_count = 0
        shares = self.shared_with_kept(body)
        # for remember(), which keeps no body past max_entry_bytes: only such a body is held
        fits = len(body) <= self._max_entry_bytes
        self._last_cut = (body, shares, self._writes) if fits else None
        for kept, share in zip(self._bodies, shares, strict=True):
            count = bisect_right(kept[2], share)
            if count > best_count:
                best, best_count = kept, count
        if best is None:
            return None
        tail = _message_ends(body, best[2][best_count - 1])
        if tail is None:
            return None
        next_at, tail_ends = tail
        return Cut(
            body[: best[1]] + body[next_at:],
            best[3][:best_count],
            best[1],
            best[2][:best_count] + tail_ends,
            best if best_count == len(best[2]) else None,
        )

    def remember(
        self,
        body: bytes,
        first: int,
        ends: tuple[int, ...],
        messages: tuple[object, ...],
        replaces: Kept | None = None,
    ) -> None:
        """Keep a chat body whose messages decoded to `messages`, most recent first; `replaces`,
        the kept body it repeats whole, goes (the new one holds its Structs)."""
        last, self._last_cut = self._last_cut, None
        if len(ends) != len(messages) or not self.takes(len(body), len(messages)):
            return
        fresh = last is not None and last[0] is body and last[2] == self._writes
        shares = last[1] if last is not None and fresh else None
        bodies, shared = self._bodies, self._shared
        for index, kept in enumerate(bodies):
            if kept is replaces:
                del bodies[index]
                del shared[index]
                if shares is not None:
                    del shares[index]
                break
        bodies.insert(0, (body, first, ends, messages))
        shared[:] = [len(body), *(shares if shares is not None else [-1] * (len(bodies) - 1))]
        del bodies[self._max_entries :]
        del shared[self._max_entries :]
        self._writes += 1

    def chat_root(self, model: str, tools: bytes | None) -> bytes:
        """A chat's h0, the last one kept: a client sends the same model and tools every turn
        (a sha256 over them and four length-prefixed fields, ~2.5 us a request, gone)."""
        last = self._last_root
        if last is not None and last[0] == model and last[1] == tools:
            return last[2]
        root = _root(_KIND_CHAT, model, tools)
        self._last_root = (model, tools, root)
        return root

    def shared_with_kept(self, body: bytes) -> list[int]:
        """How many leading bytes `body` shares with each kept body, most recent first. Only the
        first is compared whole: the kept bodies' own shares with it decide the rest (of three
        bodies, lcp(a, c) is min(lcp(a, b), lcp(b, c)) when those two differ), and where they are
        equal the compare starts there. compare.py's 16 chats share 32.6 of 32.7 KiB: 8 memcmps of
        it a request, now 1."""
        bodies = self._bodies
        if _shared_prefix is None or not bodies:
            return []
        first = _shared_prefix(body, bodies[0][0], 0)
        out = [first]
        for kept, between in zip(bodies[1:], self._shared[1:], strict=True):
            if between < 0:
                out.append(_shared_prefix(body, kept[0], 0))
            elif between != first:
                out.append(min(between, first))
            else:
                out.append(_shared_prefix(body, kept[0], between))
        return out

    def scan(self, body: bytes) -> tuple[int, tuple[int, ...]] | None:
        """Where `body`'s messages array opens and each message ends (the C scan), or None."""
        return None if _message_ends is None else _message_ends(body, 0)
