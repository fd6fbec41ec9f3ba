"""The peer wire (spec §12): Delta (POST /peer/delta) and Snapshot (GET /peer/snapshot,
also the state file), as MessagePack maps keyed by field name.

Unknown fields are ignored and missing ones take their defaults, so mixed
versions interoperate during a rolling update; `proto` is bumped only for a
breaking change, and a peer on another proto answers 409. Samples of every
released version live under tests/peer/testdata/proto<N>/ and must keep decoding.

A full snapshot (200k prefix entries, ~17 MB) takes ~1.5 s to decode in one
call on these machines, and ~260 ms to encode: one event-loop stall each. So a
writer puts the prefix entries in `prefix_slices`, each a separately encoded
list of at most SLICE_ENTRIES entries, most recent first: the outer decode only
skips over them (zero-copy views into the received bytes), and each slice
is decoded and merged between yields.
The plain `prefix` list is still read (the recorded proto-1 state file has it).

Encoding the whole Snapshot in one call copies every slice into one 17 MB buffer: a 14 ms
step. `snapshot_parts` writes the same bytes as `encode(Snapshot(...))` as a sequence of
parts (the frame by hand, each slice as is, cells a thousand at a time); senders write the
parts one by one and never join them on the loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Final, TypeVar

import msgspec

from pharos.prefix import PrefixEntry, PrefixOp
from pharos.sched import Gauges
from pharos.state import StatRecord
from pharos.usage import Cell

PROTO: Final = 1
SLICE_ENTRIES: Final = 500
"""Prefix entries per slice: decoding and merging one stays under the 5 ms stall budget
(benchmarks/bench_peer.py measures the longest step)."""


class Delta(msgspec.Struct, frozen=True, kw_only=True):
    """One origin's tick: absolute gauges and current cells (a lost delta is repaired by the
    next one), plus the prefix ops since the last tick (lossy hints)."""

    proto: int = PROTO
    origin: Annotated[int, msgspec.Meta(ge=0)] = 0  # msgpack ints stop at 2**64 - 1
    fingerprint: int = 0  # static backend set + key set + usage zone (§10)
    leaving: bool = False  # sent on shutdown: drop my gauges now
    gauges: Gauges = msgspec.field(default_factory=Gauges)
    cells: list[Cell] = []  # today + yesterday, current + previous minute, this origin's only
    prefix: list[PrefixOp] = []


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Prefix entries most recent first, Day cells of every origin within retention, stats."""

    proto: int = PROTO
    prefix: list[PrefixEntry] = []  # by target key, most recent first (older writers)
    prefix_slices: list[memoryview] = []  # each an encoded list[PrefixEntry], most recent first
    cells: list[Cell] = []
    stats: list[StatRecord] = []

    def entry_count(self) -> int:
        """Exact for `prefix`; for slices an upper bound (each holds at most SLICE_ENTRIES)."""
        return len(self.prefix) + SLICE_ENTRIES * len(self.prefix_slices)


class WireError(Exception):
    """Bytes from a peer or a file that aren't a usable message; the text names the source."""


class ProtoMismatch(WireError):
    def __init__(self, source: str, proto: int, expected: int = PROTO) -> None:
        super().__init__(
            f"{source}: written with wire version {proto}, this Pharos reads {expected}"
        )
        self.proto = proto


class _ProtoOnly(msgspec.Struct):
    proto: int = PROTO


_ENCODER: Final = msgspec.msgpack.Encoder()
_DELTA: Final = msgspec.msgpack.Decoder(Delta)
_SNAPSHOT: Final = msgspec.msgpack.Decoder(Snapshot)
_PROTO: Final = msgspec.msgpack.Decoder(_ProtoOnly)
_ENTRIES: Final = msgspec.msgpack.Decoder(list[PrefixEntry])
_T = TypeVar("_T")
Buffer = bytes | bytearray | memoryview


def encode(message: Delta | Snapshot) -> bytes:
    return _ENCODER.encode(message)


def encode_entries(entries: Sequence[PrefixEntry]) -> memoryview:
    return memoryview(_ENCODER.encode(entries))


CELLS_PER_PART: Final = 500


def snapshot_parts(
    slices: Sequence[memoryview], cells: Sequence[Cell], stats: Sequence[StatRecord]
) -> Iterator[Buffer]:
    """`encode(Snapshot(prefix_slices=slices, cells=cells, stats=stats))`, byte for byte, in
    parts: a fixed header, each slice with its bin header, cells CELLS_PER_PART at a time."""
    yield snapshot_head(len(slices))
    for raw in slices:
        yield slice_head(raw)
        yield raw
    yield from snapshot_tail(cells, stats)


def snapshot_head(slice_count: int) -> bytes:
    """snapshot_parts' first part: what comes before the first slice."""
    return b"".join(
        (
            b"\x85",  # a map of Snapshot's five fields, in declaration order
            _ENCODER.encode("proto"),
            _ENCODER.encode(PROTO),
            _ENCODER.encode("prefix"),
            _ENCODER.encode([]),
            _ENCODER.encode("prefix_slices"),
            _array_header(slice_count),
        )
    )


def slice_head(raw: Buffer) -> bytes:
    """The bin header one slice is written after."""
    return _bin_header(len(memoryview(raw)))


def snapshot_tail(cells: Sequence[Cell], stats: Sequence[StatRecord]) -> Iterator[Buffer]:
    """snapshot_parts' parts after the last slice: the cells, then the stats."""
    yield _ENCODER.encode("cells") + _array_header(len(cells))
    for start in range(0, len(cells), CELLS_PER_PART):
        yield b"".join(_ENCODER.encode(cell) for cell in cells[start : start + CELLS_PER_PART])
    yield _ENCODER.encode("stats") + _ENCODER.encode(stats)


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + struct.pack(">H", count)
    return b"\xdd" + struct.pack(">I", count)


def _bin_header(size: int) -> bytes:
    if size < 1 << 8:
        return b"\xc4" + bytes((size,))
    if size < 1 << 16:
        return b"\xc5" + struct.pack(">H", size)
    return b"\xc6" + struct.pack(">I", size)


def decode_delta(data: Buffer, *, source: str = "delta", proto: int = PROTO) -> Delta:
    return _decode(_DELTA, data, source, "delta", proto)


def decode_snapshot(data: Buffer, *, source: str = "snapshot", proto: int = PROTO) -> Snapshot:
    return _decode(_SNAPSHOT, data, source, "state snapshot", proto)


def entry_slices(snapshot: Snapshot) -> Iterator[list[PrefixEntry]]:
    """The snapshot's entries, most recent first, one decoded slice at a time; a slice that
    doesn't decode is skipped (entries are hints), never an error for the rest."""
    for start in range(0, len(snapshot.prefix), SLICE_ENTRIES):
        yield snapshot.prefix[start : start + SLICE_ENTRIES]
    for raw in snapshot.prefix_slices:
        try:
            yield _ENTRIES.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue


def slice_entries(entries: Iterable[PrefixEntry]) -> Iterator[list[PrefixEntry]]:
    batch: list[PrefixEntry] = []
    for entry in entries:
        batch.append(entry)
        if len(batch) == SLICE_ENTRIES:
            yield batch
            batch = []
    if batch:
        yield batch


def _decode(
    decoder: msgspec.msgpack.Decoder[_T], data: Buffer, source: str, what: str, expected: int
) -> _T:
    try:
        proto = _PROTO.decode(data).proto
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise WireError(f"{source}: not a Pharos {what} ({error})") from error
    if proto != expected:
        raise ProtoMismatch(source, proto, expected)
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise WireError(f"{source}: not a Pharos {what} ({error})") from error
