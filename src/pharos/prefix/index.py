"""Bounded LRU index: prefix hash -> up to 4 targets that recently served it (spec §6).

Memory: OrderedDict[int, bytes] (one per shard, below), each value its targets' packed slots
(prefix/slots.py: the 17-byte record and the slot rules): measured
~190 B per one-slot entry and ~240 B per four-slot entry all-in, so a full 200k
index keeps process RSS near 75 MB (benchmarks/bench_prefix.py), under the 120 MB
budget. No prompt text is stored, only 64-bit hashes.

Times inside the index are the caller's monotonic seconds. Peers and snapshots
carry wall-clock seconds; merge/restore/export convert with the injected clock.

Shards: an index of SHARD_MIN_CAP entries or more is SHARDS LRUs chosen by the hash's low
bits (SHA-256 bits: uniform), each capped at cap/SHARDS. One OrderedDict of 200k entries
rehashes all of them in one step when it grows past 174,762 entries (13 ms measured while
a 200k snapshot merged into an empty index) and again every ~500k inserts at its cap; a
shard rehashes a sixty-fourth. Exports walk the shards one at a time (see export_batches),
copying one per step: a 3,125-entry shard's copy took 0.9-1.1 ms of CPU on a loaded 2-core VM,
6,250 entries (32 shards) 1.1-2.9 ms (2026-12-07); RSS with the index full is the same
(89.8 against 90.1 MB, benchmarks/bench_memory.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence

from pharos.clock import Clock, SystemClock
from pharos.prefix.chain import Chain
from pharos.prefix.export import DONE, SLOT, U32, ShardCopy, copy_shard, export_entries
from pharos.prefix.links import Runs, scan
from pharos.prefix.slots import (
    LOCAL,
    LOCAL_CODE,
    SOURCE_CODE,
    SOURCES,
    Match,
    Slot,
    Source,
    local_time,
    touch_chain,
    with_slot,
)
from pharos.prefix.tools import ToolsCaching
from pharos.prefix.wire import PrefixEntry, PrefixOp

DEFAULT_CAP_ENTRIES = 200_000
SHARDS = 64
SHARD_MIN_CAP = 65_536
"""Below this an index is one LRU (exact LRU order; every small-cap test relies on it)."""

_SLOT = SLOT
_U32 = U32


class PrefixIndex:
    """Owns the LRU of prefix hashes. Every method is synchronous and O(chain length)."""

    def __init__(
        self,
        cap_entries: int = DEFAULT_CAP_ENTRIES,
        *,
        clock: Clock | None = None,
        shards: int | None = None,
        tools: ToolsCaching | None = None,
    ):
        """`shards`: None picks SHARDS from SHARD_MIN_CAP entries up, else 1; the benchmark
        passes 1 to measure one big LRU beside the sharded one."""
        if cap_entries < 1:
            raise ValueError(f"prefix index cap_entries must be at least 1, got {cap_entries}")
        if shards is not None and (shards < 1 or shards & (shards - 1)):
            raise ValueError(f"prefix index shards must be a power of two, got {shards}")
        self._cap_entries = cap_entries
        self._clock: Clock = SystemClock() if clock is None else clock
        count = shards if shards is not None else SHARDS if cap_entries >= SHARD_MIN_CAP else 1
        self._mask = count - 1
        self._shard_cap = -(-cap_entries // count)
        self._shards: tuple[OrderedDict[int, bytes], ...] = tuple(
            OrderedDict() for _ in range(count)
        )
        # Each shard's get and move_to_end, bound once: the attribute lookups were ~15% of a
        # lookup's and record's instructions per link (callgrind).
        self._gets: tuple[Callable[[int], bytes | None], ...] = tuple(
            shard.get for shard in self._shards
        )
        self._moves: tuple[Callable[[int], None], ...] = tuple(
            shard.move_to_end for shard in self._shards
        )
        # Per shard, the links the last chain record left at its end (links.touch skips moving
        # them again); None after any other write to the shard.
        self._runs: Runs = [None] * count
        # Exports in progress: for each, per shard, its copy taken before the shard changed
        # (None: not copied yet). See export_batches.
        self._exports: list[list[ShardCopy | None]] = []
        self._tools = ToolsCaching() if tools is None else tools

    @property
    def cap_entries(self) -> int:
        return self._cap_entries

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._shards)

    def __contains__(self, hash_: object) -> bool:
        if not isinstance(hash_, int):
            return False
        return hash_ in self._shards[hash_ & self._mask]

    def __iter__(self) -> Iterator[int]:
        """Hashes, least recently used first (within each shard; shards one after another)."""
        return iter([hash_ for shard in self._shards for hash_ in shard])

    def _shard(self, hash_: int) -> OrderedDict[int, bytes]:
        return self._shards[hash_ & self._mask]

    def slots(self, hash_: int) -> tuple[Slot, ...]:
        packed = self._shard(hash_).get(hash_)
        if packed is None:
            return ()
        return tuple(
            Slot(target_id, generation, used_s, SOURCES[source])
            for used_s, target_id, generation, source in _SLOT.iter_unpack(packed)
        )

    def lookup(
        self,
        chain: Chain,
        generation_of: Callable[[int], int | None],
        stop_after: int | None = None,
    ) -> dict[int, Match]:
        """Per target, the longest prefix of `chain` it holds under its current generation.

        `stop_after`: how many targets can match at most (the candidates); once each has its
        longest match the shorter links are not read. One target holding a 50-link chain: 1 link
        read instead of 50 (p50 9.2 -> 1.2 µs, 50-message chat).
        """
        found: dict[int, Match] = {}
        current: dict[int, int | None] = {}
        shards = self._shards
        mask = self._mask
        hashes = chain.hashes
        i = len(hashes) - 1
        packed = b""
        while True:
            held = scan(shards, mask, hashes, i - 1 if packed else i, packed)
            if held is None:
                return found
            i, packed = held
            for _used_s, target_id, generation, source in _SLOT.iter_unpack(packed):
                if target_id in found:
                    continue
                if target_id in current:
                    live = current[target_id]
                else:
                    live = generation_of(target_id)
                    if live is not None:
                        live &= _U32
                    current[target_id] = live
                if live is None or live != generation:
                    continue
                matched = chain.cum_bytes[i]
                if chain.tools_bytes:
                    matched = self._tools.matched_bytes(target_id, chain, matched)
                found[target_id] = Match(matched, SOURCES[source])
                if stop_after is not None and len(found) >= stop_after:
                    return found

    def record(
        self,
        chain: Chain,
        target_id: int,
        generation: int,
        now_s: float,
        source: Source = Source.LOCAL,
    ) -> None:
        """Add the target to every link of the chain (call on success only, spec §6 Record)."""
        if not 0 <= target_id <= _U32:
            raise ValueError(f"target_id must fit in 32 bits, got {target_id}")
        code = LOCAL_CODE if source is LOCAL else SOURCE_CODE[source]
        self._record(chain.hashes, target_id, generation & _U32, now_s, code)

    def observe_cached(
        self, chain: Chain, target_id: int, predicted_bytes: int, cached_tokens: int | None
    ) -> int:
        """A reply's cached tokens against lookup's match for it: teaches whether the target
        caches tools, and returns the prediction to judge the reply by (prefix/tools.py)."""
        return self._tools.observe(target_id, chain, predicted_bytes, cached_tokens)

    def correct(self, chain: Chain, target_id: int) -> None:
        """Forget the target on every link of the chain (the engine cached far less)."""
        self._remove(chain.hashes, target_id)

    def merge(
        self,
        ops: Iterable[PrefixOp],
        target_id_of: Callable[[str], int | None],
        generation_of: Callable[[int], int | None],
    ) -> None:
        """Apply peer ops as local records (source PEER) or removals; unknown targets are dropped.

        Records are stamped with this instance's current generation of the target.
        """
        now_s = self._clock.now()
        wall_to_local_s = now_s - self._clock.time()
        peer = SOURCE_CODE[Source.PEER]
        for op in ops:
            target_id = self._known(target_id_of(op.target_key))
            if target_id is None:
                continue
            if op.remove:
                self._remove(op.hashes, target_id)
                continue
            generation = generation_of(target_id)
            if generation is None:
                continue
            used_s = local_time(op.last_used_s, wall_to_local_s, now_s)
            self._record(op.hashes, target_id, generation & _U32, used_s, peer)

    def export(
        self,
        target_key_of: Callable[[int], str | None],
        generation_of: Callable[[int], int | None] | None = None,
    ) -> list[PrefixEntry]:
        """Live entries, most recently used first, for snapshots and the state file.

        A slot whose target has no key is left out; with `generation_of`, so is a
        stale one (a receiver would otherwise stamp it fresh). A full index takes
        hundreds of ms: on the event loop, use `export_batches` and yield between batches.
        """
        return [
            entry for batch in self.export_batches(target_key_of, generation_of) for entry in batch
        ]

    def export_batches(
        self,
        target_key_of: Callable[[int], str | None],
        generation_of: Callable[[int], int | None] | None = None,
        batch_entries: int = 500,
    ) -> Generator[list[PrefixEntry], None, None]:
        """`export` in batches, shard after shard, each most recently used first; the caller
        may await between batches while the index keeps changing.

        Never torn: the batches are exactly the index as it was at the first batch. A shard
        is copied when the export reaches it, or earlier by the first record or removal that
        would change it (copy before write), so every copy is the shard as it was when the
        export began. No step copies more than one shard (1/SHARDS of the index): one copy of a
        200k index in a step stalled the loop 10-21 ms. The first batch is empty: the step that
        began the export copies nothing (a snapshot's also exports usage cells and stats). The
        empty batch before each shard's entries ends the step that copied it.
        """
        local_to_wall_s = self._clock.time() - self._clock.now()
        copies: list[ShardCopy | None] = [None] * len(self._shards)
        self._exports.append(copies)
        key_of_slot: dict[int, str | None] = {}  # (target_id << 32 | generation) -> key
        try:
            yield []  # the instant is fixed; the caller's own exports share this step, not a copy
            for number in range(len(self._shards)):
                copy = copies[number]
                if copy is None:
                    copy = copy_shard(self._shards[number])
                    copies[number] = DONE
                    yield []  # copying a shard is a step of its own (~1 ms at 6.25k entries)
                hashes, values = copy
                copies[number] = DONE  # later writes to this shard need no copy
                for start in range(0, len(hashes), batch_entries):
                    end = start + batch_entries
                    batch = export_entries(
                        hashes[start:end],
                        values[start:end],
                        local_to_wall_s,
                        key_of_slot,
                        target_key_of,
                        generation_of,
                    )
                    yield batch
        finally:
            self._exports.remove(copies)

    def _before_write(self, number: int) -> None:
        """Copy shard `number` for every export in progress that hasn't reached it yet."""
        for copies in self._exports:
            if copies[number] is None:
                copies[number] = copy_shard(self._shards[number])

    def restore(
        self,
        entries: Sequence[PrefixEntry],
        target_id_of: Callable[[str], int | None],
        generation_of: Callable[[int], int | None],
    ) -> None:
        """Merge a snapshot (most recent first) as records with source RESTORED.

        Applied oldest first, so the snapshot's most recent entries end up most
        recent here too, and a cap smaller than the snapshot keeps those. A full
        snapshot takes hundreds of ms: on the event loop, pass consecutive slices of
        the snapshot, the last (oldest) slice first, and yield between them.
        """
        now_s = self._clock.now()
        wall_to_local_s = now_s - self._clock.time()
        restored = SOURCE_CODE[Source.RESTORED]
        targets: dict[str, tuple[int, int] | None] = {}  # key -> (target_id, generation)
        for entry in reversed(entries):
            for slot in entry.slots:
                if slot.target_key in targets:
                    target = targets[slot.target_key]
                else:
                    target = self._target(slot.target_key, target_id_of, generation_of)
                    targets[slot.target_key] = target
                if target is None:
                    continue
                used_s = local_time(slot.last_used_s, wall_to_local_s, now_s)
                self._record((entry.hash,), target[0], target[1], used_s, restored)

    def _target(
        self,
        key: str,
        target_id_of: Callable[[str], int | None],
        generation_of: Callable[[int], int | None],
    ) -> tuple[int, int] | None:
        target_id = self._known(target_id_of(key))
        if target_id is None:
            return None
        generation = generation_of(target_id)
        return None if generation is None else (target_id, generation & _U32)

    @staticmethod
    def _known(target_id: int | None) -> int | None:
        if target_id is None or not 0 <= target_id <= _U32:
            return None
        return target_id

    def _record(
        self, hashes: Sequence[int], target_id: int, generation: int, used_s: float, source: int
    ) -> None:
        shards = self._shards
        mask = self._mask
        cap = self._shard_cap
        exports = self._exports
        if not exports and len(hashes) > 1:
            touch_chain(
                shards,
                self._moves,
                mask,
                cap,
                hashes,
                target_id,
                generation,
                used_s,
                source,
                self._runs,
            )
            return
        # One link (a restore's or a merge's entry), or an export copying shards: the plain loop.
        # Through touch, restore of 20k two-slot entries took 410M instructions against 357M
        # (callgrind).
        runs = self._runs
        for hash_ in hashes:
            number = hash_ & mask
            runs[number] = None
            if exports:
                self._before_write(number)
            entries = shards[number]
            packed = entries.get(hash_)
            if packed is None:
                if len(entries) >= cap:
                    entries.popitem(last=False)
                entries[hash_] = _SLOT.pack(used_s, target_id, generation, source)
                continue
            updated = with_slot(packed, target_id, generation, used_s, source)
            if updated is not packed:
                entries[hash_] = updated
            entries.move_to_end(hash_)

    def _remove(self, hashes: Iterable[int], target_id: int) -> None:
        for hash_ in hashes:
            number = hash_ & self._mask
            entries = self._shards[number]
            packed = entries.get(hash_)
            if packed is None:
                continue
            kept = [slot for slot in _SLOT.iter_unpack(packed) if slot[1] != target_id]
            if len(kept) * _SLOT.size == len(packed):
                continue
            if self._exports:
                self._before_write(number)
            self._runs[number] = None
            if not kept:
                del entries[hash_]
            else:
                entries[hash_] = b"".join(_SLOT.pack(*slot) for slot in kept)
