"""Exporting the prefix index (spec §12 snapshots): one shard copied at a time, entries
encoded by target key in wall-clock seconds. The packed slot layout lives here too, so the
index and its export read the same 17-byte records.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable

from pharos.prefix.wire import ExportedSlot, PrefixEntry

SLOT = struct.Struct("<dIIB")  # last_used_s, target_id, generation (low 32 bits), source
U32 = 0xFFFF_FFFF

ShardCopy = tuple[list[int], list[bytes]]
DONE: ShardCopy = ([], [])
"""A shard an export has finished: writes to it copy nothing more for that export."""


def copy_shard(shard: OrderedDict[int, bytes]) -> ShardCopy:
    """Hashes and values, most recently used first. Two flat lists, not (hash, packed)
    tuples: 200k tuples took 20-40 ms of one step, the lists a few (bench_peer.py)."""
    hashes = list(shard)
    values = list(shard.values())
    hashes.reverse()
    values.reverse()
    return hashes, values


def export_entries(
    hashes: list[int],
    values: list[bytes],
    local_to_wall_s: float,
    key_of_slot: dict[int, str | None],
    target_key_of: Callable[[int], str | None],
    generation_of: Callable[[int], int | None] | None,
) -> list[PrefixEntry]:
    batch: list[PrefixEntry] = []
    for hash_, packed in zip(hashes, values, strict=True):
        slots: list[ExportedSlot] = []
        for used_s, target_id, generation, _source in SLOT.iter_unpack(packed):
            slot_key = (target_id << 32) | generation
            if slot_key in key_of_slot:
                key = key_of_slot[slot_key]
            else:
                key = exported_key(target_id, generation, target_key_of, generation_of)
                key_of_slot[slot_key] = key
            if key is not None:
                slots.append(ExportedSlot(key, used_s + local_to_wall_s))
        if slots:
            batch.append(PrefixEntry(hash_, slots))
    return batch


def exported_key(
    target_id: int,
    generation: int,
    target_key_of: Callable[[int], str | None],
    generation_of: Callable[[int], int | None] | None,
) -> str | None:
    if generation_of is not None:
        current = generation_of(target_id)
        if current is None or current & U32 != generation:
            return None
    return target_key_of(target_id)
