"""The prefix index's slot records: what an entry's packed value is and how a record merges
into one (spec §6).

A value packs up to MAX_SLOTS slots as 17-byte records (export.SLOT: last_used_s float64,
target_id uint32, generation uint32, source uint8), one per target that recently served the
prefix. Times are the index's: the caller's monotonic seconds (local_time converts a peer's).

Slot rules, chosen so applying the same records in any order and any number of
times gives the same memberships:
- same target again: last_used_s = the later of the two; source = the source of
  the later record (on a tie the first arrival keeps it); generation = the new
  record's, which is always the target's current one.
- a new target in a full entry replaces the least recently used slot only if it
  is more recent than that slot; on a tie the first arrival keeps it.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, final

from pharos.prefix.export import SLOT
from pharos.prefix.links import Runs, touch

MAX_SLOTS = 4

_SLOT = SLOT
_SLOT_BYTES = SLOT.size


class Source(enum.Enum):
    """How a slot's newest record arrived; only used to measure prediction accuracy per source."""

    LOCAL = "local"
    PEER = "peer"
    RESTORED = "restored"


SOURCES: tuple[Source, ...] = (Source.LOCAL, Source.PEER, Source.RESTORED)
SOURCE_CODE = {source: code for code, source in enumerate(SOURCES)}
LOCAL = Source.LOCAL
LOCAL_CODE = SOURCE_CODE[LOCAL]
"""Every reply's record is LOCAL: tested by identity before the dict, whose key hash is Enum's
Python-level __hash__ (a Python call in each record)."""


@final
class Match:
    """A slotted class with Final attributes, not a frozen dataclass (policy.RouteReq's reason):
    the dataclass's __init__ ran interpreted through object.__setattr__, ~7k instructions each
    (callgrind), 2 an acquire in bench_sched; compiled with the index this is a C struct."""

    __slots__ = ("matched_bytes", "source")

    def __init__(self, matched_bytes: int, source: Source) -> None:
        self.matched_bytes: Final = matched_bytes
        self.source: Final = source

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Match)
            and self.matched_bytes == other.matched_bytes
            and self.source is other.source
        )

    def __hash__(self) -> int:
        return hash((self.matched_bytes, self.source))

    def __repr__(self) -> str:
        return f"Match(matched_bytes={self.matched_bytes!r}, source={self.source!r})"


@dataclass(frozen=True, slots=True)
class Slot:
    target_id: int
    generation: int  # low 32 bits of the target's generation
    last_used_s: float
    source: Source


def with_slot(
    packed: bytes, target_id: int, generation: int, last_used_s: float, source: int
) -> bytes:
    """The entry `packed` after one record; returns `packed` itself when nothing changed."""
    size = _SLOT_BYTES
    count = 0
    for old_used_s, old_target, old_generation, old_source in _SLOT.iter_unpack(packed):
        if old_target == target_id:
            if last_used_s <= old_used_s:
                if old_generation == generation:
                    return packed
                last_used_s, source = old_used_s, old_source
            at = count * size
            new_slot = _SLOT.pack(last_used_s, target_id, generation, source)
            return packed[:at] + new_slot + packed[at + size :]
        count += 1
    if count < MAX_SLOTS:
        return packed + _SLOT.pack(last_used_s, target_id, generation, source)
    victim = 0
    victim_used_s = _SLOT.unpack_from(packed, 0)[0]
    for i in range(1, count):
        used_s = _SLOT.unpack_from(packed, i * size)[0]
        if used_s <= victim_used_s:  # `<=`: among ties the latest arrival goes
            victim, victim_used_s = i, used_s
    if last_used_s <= victim_used_s:
        return packed
    at = victim * size
    return (
        packed[:at] + packed[at + size :] + _SLOT.pack(last_used_s, target_id, generation, source)
    )


def touch_chain(
    shards: tuple[OrderedDict[int, bytes], ...],
    moves: tuple[Callable[[int], None], ...],
    mask: int,
    cap: int,
    hashes: Sequence[int],
    target_id: int,
    generation: int,
    used_s: float,
    source: int,
    runs: Runs,
) -> None:
    """links.touch with this record's update. A function of its own: a closure inside
    PrefixIndex._record made its arguments cells there, on every call (restore: +15%
    instructions)."""

    def update(packed: bytes) -> bytes:
        return with_slot(packed, target_id, generation, used_s, source)

    fresh = _SLOT.pack(used_s, target_id, generation, source)
    touch(shards, moves, mask, cap, hashes, fresh, update, runs)


def local_time(wall_s: float, wall_to_local_s: float, now_s: float) -> float:
    """A peer's wall-clock time on this process's monotonic clock, never in the future."""
    if not math.isfinite(wall_s):
        return now_s
    return min(wall_s + wall_to_local_s, now_s)
