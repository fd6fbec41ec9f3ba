"""The §12 Snapshot (GET /peer/snapshot and the state file) and its atomic file I/O.

MessagePack, fields by name with defaults: a newer writer's extra fields are
ignored and an older writer's missing ones take their defaults, so mixed
versions interoperate. `proto` is bumped only for a breaking change. Recorded
samples of every released version live under tests/peer/testdata/proto<N>/.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Final

import msgspec

from pharos.prefix import PrefixEntry
from pharos.usage import Cell

PROTO: Final = 1


class TargetStatsRecord(msgspec.Struct, frozen=True):
    """A target's EWMAs as a peer or the state file carries them; None = no samples."""

    target_key: str  # backend URL + " " + model
    prefill_s_per_token: float | None = None
    load_s: float | None = None
    service_s: float | None = None


class StateSnapshot(msgspec.Struct, frozen=True):
    proto: int = PROTO
    prefix: list[PrefixEntry] = []  # by target key, most recent first
    cells: list[Cell] = []  # Day cells of every origin, within retention
    stats: list[TargetStatsRecord] = []


class StateFileError(Exception):
    """The state file exists but can't be used; the caller logs it and starts empty."""


_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder(StateSnapshot)


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
    """None when there is no file; StateFileError when it can't be read or decoded."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StateFileError(f"{path}: can't read the state file ({error})") from error
    return decode_snapshot(data, source=str(path))


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


def _write_atomically(path: Path, data: bytes) -> None:
    directory = path.parent
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
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
