"""What the prefix index sends to peers and writes to snapshots (spec §6 Replication, §12).

Targets travel by key (backend URL + model), never by local id, and times as
wall-clock seconds: ids and monotonic clocks are local to one process.

gc=False: these hold no cycles, and 200k tracked entries arriving in a snapshot made the
collector stall the event loop for 20-50 ms at a time (benchmarks/bench_peer.py).
"""

from __future__ import annotations

import msgspec


class PrefixOp(msgspec.Struct, frozen=True, gc=False):
    """One record (or, with remove, one correction) a peer should apply."""

    target_key: str
    hashes: list[int]
    last_used_s: float  # wall clock
    remove: bool = False


class ExportedSlot(msgspec.Struct, frozen=True, gc=False):
    target_key: str
    last_used_s: float  # wall clock


class PrefixEntry(msgspec.Struct, frozen=True, gc=False):
    hash: int
    slots: list[ExportedSlot]
