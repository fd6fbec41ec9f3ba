"""The §12 Snapshot (GET /peer/snapshot and the state file) and its atomic file I/O.

MessagePack, fields by name with defaults: a newer writer's extra fields are
ignored and an older writer's missing ones take their defaults, so mixed
versions interoperate. `proto` is bumped only for a breaking change. Recorded
samples of every released version live under tests/peer/testdata/proto<N>/.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Final, overload

import msgspec

from pharos.prefix import PrefixEntry
from pharos.usage import Cell

PROTO: Final = 1

log = logging.getLogger("pharos.state_file")


class TargetStatsRecord(msgspec.Struct, frozen=True):
    """A target's EWMAs as a peer or the state file carries them; None = no samples."""

    target_key: str  # backend URL + " " + model
    prefill_s_per_token: float | None = None
    load_s: float | None = None
    service_s: float | None = None


class StateSnapshot(msgspec.Struct, frozen=True):
    proto: int = PROTO
    prefix: Sequence[PrefixEntry] = []  # by target key, most recent first
    cells: list[Cell] = []  # Day cells of every origin, within retention
    stats: list[TargetStatsRecord] = []


class StateFileError(Exception):
    """The state file exists but can't be used; the caller logs it and starts empty."""


_ENCODER: Final = msgspec.msgpack.Encoder(enc_hook=lambda obj: _encode_lazy(obj))
_DECODER: Final = msgspec.msgpack.Decoder(StateSnapshot)


class _StoredSnapshot(msgspec.Struct, frozen=True):
    """The state file as read at startup: prefix entries kept as raw MessagePack."""

    proto: int = PROTO
    prefix: list[msgspec.Raw] = []
    cells: list[Cell] = []
    stats: list[TargetStatsRecord] = []


_STORED_DECODER: Final = msgspec.msgpack.Decoder(_StoredSnapshot)
_ENTRY_DECODER: Final = msgspec.msgpack.Decoder(PrefixEntry)


class LazyEntries(Sequence[PrefixEntry]):
    """Prefix entries decoded a slice at a time, as the restore asks for them.

    Decoding all 200k entries of a full index at once made 800k slot objects and key
    strings live together; freed, they left the heap fragmented: RSS 242 MB after the
    restore against 80 MB for the same index filled live (benchmarks/bench_restore.py).
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: list[msgspec.Raw]) -> None:
        self._raw = raw

    def __len__(self) -> int:
        return len(self._raw)

    @overload
    def __getitem__(self, index: int) -> PrefixEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[PrefixEntry]: ...

    def __getitem__(self, index: int | slice) -> PrefixEntry | list[PrefixEntry]:
        if isinstance(index, slice):
            entries = (_decode_entry(raw) for raw in self._raw[index])
            return [entry for entry in entries if entry is not None]
        entry = _decode_entry(self._raw[index])
        return entry if entry is not None else PrefixEntry(hash=0, slots=[])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyEntries | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _decode_entry(raw: msgspec.Raw) -> PrefixEntry | None:
    """An entry, or None for one that doesn't decode: skipped, as a peer's would be."""
    try:
        return _ENTRY_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _encode_lazy(obj: object) -> object:
    if isinstance(obj, LazyEntries):
        return list(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def encode_snapshot(snapshot: StateSnapshot) -> bytes:
    return _ENCODER.encode(snapshot)


def decode_snapshot(data: bytes, *, source: str = "snapshot") -> StateSnapshot:
    """Raises StateFileError naming `source` for bytes that aren't a usable snapshot."""
    try:
        snapshot = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise StateFileError(f"{source}: not a Pharos state snapshot ({error})") from error
    if snapshot.proto != PROTO:
        raise StateFileError(
            f"{source}: written with wire version {snapshot.proto}, this Pharos reads {PROTO}"
        )
    return snapshot


def read_state_file(path: Path) -> StateSnapshot | None:
    """None when there is no file; StateFileError when it can't be read or decoded.

    Read once at startup, before any write: the moment to sweep temp files a killed
    writer left (12 kill -9 during writes once left 102 MB)."""
    swept, swept_bytes = sweep_temp_files(path)
    if swept:
        log.info(
            "removed %d temp files (%d bytes) left by interrupted state file writes",
            swept,
            swept_bytes,
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StateFileError(f"{path}: can't read the state file ({error})") from error
    try:
        stored = _STORED_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise StateFileError(f"{path}: not a Pharos state snapshot ({error})") from error
    if stored.proto != PROTO:
        raise StateFileError(
            f"{path}: written with wire version {stored.proto}, this Pharos reads {PROTO}"
        )
    return StateSnapshot(
        proto=stored.proto,
        prefix=LazyEntries(stored.prefix),
        cells=stored.cells,
        stats=stored.stats,
    )


def write_state_file(path: Path, snapshot: StateSnapshot) -> None:
    """Write to a temp file in the same directory, fsync, then rename over the old file.

    A crash at any point leaves either the old file or the new one, never a mix.
    """
    _write_atomically(path, encode_snapshot(snapshot))


async def read_state_file_async(path: Path) -> StateSnapshot | None:
    return await asyncio.to_thread(read_state_file, path)


async def write_state_file_async(path: Path, snapshot: StateSnapshot) -> None:
    """Encoding and writing both run in a thread, off the event loop."""
    await asyncio.to_thread(write_state_file, path, snapshot)


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


_TEMP_SUFFIX = ".tmp"


def sweep_temp_files(path: Path) -> tuple[int, int]:
    """Remove the temp files `_write_atomically` leaves when killed mid-write; returns
    (files, bytes). Call it only while no write to `path` is under way (at startup)."""
    prefix = _temp_prefix(path)
    removed = removed_bytes = 0
    try:
        names = os.listdir(path.parent)
    except OSError:
        return 0, 0
    for name in names:
        if not (name.startswith(prefix) and name.endswith(_TEMP_SUFFIX)):
            continue
        temp = path.parent / name
        with suppress(OSError):
            size = temp.stat().st_size
            temp.unlink()
            removed += 1
            removed_bytes += size
    return removed, removed_bytes


def _write_atomically(path: Path, data: bytes) -> None:
    directory = path.parent
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(path), suffix=_TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as temp_file:
            temp_file.write(data)
            temp_file.flush()
            os.fsync(temp_file.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; some filesystems can't, and that's not an error."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
