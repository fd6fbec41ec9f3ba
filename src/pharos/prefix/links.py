"""The prefix index's per-link loops, in Python and, when built, in C (prefix/_indexc.c).

A 194-link chat's lookup spent ~970 instructions per link in the interpreter (callgrind) and
its record as much again; the C build does the same steps. Both builds are checked against
each other by tests/prefix/test_links_builds.py; PHAROS_PURE_PYTHON=1 runs the Python ones.
"""

from __future__ import annotations

import importlib
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, cast

Shards = tuple[OrderedDict[int, bytes], ...]
Moves = tuple[Callable[[int], None], ...]
Scan = Callable[[Shards, int, tuple[int, ...], int, bytes], tuple[int, bytes] | None]
Runs = list[tuple[int, ...] | None]
"""Per shard, the links the last touch left at its end in order; None: unknown (see touch)."""


class Touch(Protocol):
    def __call__(
        self,
        shards: Shards,
        moves: Moves,
        mask: int,
        cap: int,
        hashes: Sequence[int],
        fresh: bytes,
        update: Callable[[bytes], bytes],
        runs: Runs | None = None,
        /,
    ) -> None: ...


PURE_ENV = "PHAROS_PURE_PYTHON"


def python_scan(
    shards: Shards, mask: int, hashes: tuple[int, ...], i: int, previous: bytes
) -> tuple[int, bytes] | None:
    """From link `i` down, the first link held whose entry differs from `previous` (the entry
    last read: every slot of an equal one was already judged), as (link, entry)."""
    for j in range(min(i, len(hashes) - 1), -1, -1):
        hash_ = hashes[j]
        packed = shards[hash_ & mask].get(hash_)
        if packed is not None and packed != previous:
            return j, packed
    return None


def python_touch(
    shards: Shards,
    moves: Moves,
    mask: int,
    cap: int,
    hashes: Sequence[int],
    fresh: bytes,
    update: Callable[[bytes], bytes],
    runs: Runs | None = None,
) -> None:
    """Record every link: a new one gets `fresh` (evicting its shard's least recently used at
    `cap`), a held one `update(entry)`, computed once per run of equal entries (a chain recorded
    at once leaves the same bytes on each of its links); each link becomes its shard's most
    recent, in chain order. `runs`: the C build skips the moves a shard's run makes needless
    (prefix/_indexc.c); here each touched shard's run is forgotten."""
    before = after = b""
    for hash_ in hashes:
        number = hash_ & mask
        if runs is not None:
            runs[number] = None
        entries = shards[number]
        packed = entries.get(hash_)
        if packed is None:
            if len(entries) >= cap:
                entries.popitem(last=False)
            entries[hash_] = fresh
            continue
        if packed != before:
            before = packed
            after = update(packed)
        if after is not packed:
            entries[hash_] = after
        moves[number](hash_)


def _load() -> tuple[Scan, Touch, str]:
    if os.environ.get(PURE_ENV) == "1":
        return python_scan, python_touch, f"{PURE_ENV}=1"
    try:
        native = importlib.import_module("pharos.prefix._indexc")
    except ImportError as exc:
        return python_scan, python_touch, f"not built ({exc})"
    return cast(Scan, native.scan), cast(Touch, native.touch), "compiled"


scan, touch, NATIVE_REASON = _load()
IMPLEMENTATION = "c" if NATIVE_REASON == "compiled" else "python"
