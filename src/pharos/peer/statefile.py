"""The state file: the §12 Snapshot (peer/wire.py) written atomically and read back.

One format for the state file and GET /peer/snapshot, so one restore path serves
both (peer/restore.py).
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import IO

from pharos.peer.wire import (
    Buffer,
    Snapshot,
    WireError,
    decode_snapshot,
    encode,
    slice_head,
    snapshot_head,
)

log = logging.getLogger("pharos.state_file")

_TEMP_SUFFIX = ".tmp"


class StateFileError(Exception):
    """The state file exists but can't be used; the caller logs it and starts empty."""


def read_state_file(path: Path) -> Snapshot | None:
    """None when there is no file; StateFileError when it can't be read or decoded."""
    mapped = open_state_file(path)
    return None if mapped is None else mapped.snapshot


class MappedStateFile:
    """The state file mapped read-only, not read into memory: its prefix slices stay views of
    the mapping, and `release(i)` hands slice i's pages back once it is merged. Restoring a
    full 200k-entry index (a 17.5 MB file) from bytes read whole peaked at 106.9 MB against
    89.5 when done (benchmarks/bench_memory.py); the pages of the slices not yet merged are
    the most it holds now. A file another writer laid out (the older `prefix` list) is
    decoded the same way; only its pages aren't released early. Pharos replaces the file by
    rename (a new inode), so a save during the restore never changes the mapped bytes."""

    def __init__(self, snapshot: Snapshot, pages: mmap.mmap | None, starts: list[int]) -> None:
        self.snapshot = snapshot
        self._pages = pages
        self._starts = starts  # slice i's first byte (its bin header) .. the tail's first byte

    def release(self, index: int) -> None:
        """Slice `index` is merged, and every slice after it: give back the whole pages from
        its start to the next slice's start (slices merge last first)."""
        if self._pages is None or not 0 <= index < len(self._starts) - 1:
            return
        page = mmap.PAGESIZE
        start = -(-self._starts[index] // page) * page
        end = -(-self._starts[index + 1] // page) * page
        if index == len(self._starts) - 2:
            end = self._starts[index + 1] // page * page  # the tail (cells, stats) stays
        if end > start:
            self._pages.madvise(mmap.MADV_DONTNEED, start, end - start)


def open_state_file(path: Path) -> MappedStateFile | None:
    """None when there is no file; StateFileError when it can't be read or decoded.

    Opened once at startup, before any write: the moment to sweep temp files a killed
    writer left (12 kill -9 during writes once left 102 MB)."""
    swept, swept_bytes = sweep_temp_files(path)
    if swept:
        log.info(
            "removed %d temp files (%d bytes) left by interrupted state file writes",
            swept,
            swept_bytes,
        )
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            pages = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise StateFileError(f"{path}: can't read the state file ({error})") from error
    try:
        snapshot = decode_snapshot(b"" if pages is None else memoryview(pages), source=str(path))
    except WireError as error:
        raise StateFileError(str(error)) from error
    if pages is None or not hasattr(mmap, "MADV_DONTNEED"):
        return MappedStateFile(snapshot, None, [])
    starts = _slice_starts(pages, snapshot)
    return MappedStateFile(snapshot, pages if starts else None, starts)


def _slice_starts(pages: mmap.mmap, snapshot: Snapshot) -> list[int]:
    """Where each slice's bin header starts, then where the tail starts, as the layout
    snapshot_parts writes puts them; [] when the bytes there say otherwise."""
    offset = len(head := snapshot_head(len(snapshot.prefix_slices)))
    if snapshot.prefix or pages[: len(head)] != head:
        return []
    starts = []
    for raw in snapshot.prefix_slices:
        header = slice_head(raw)
        if pages[offset : offset + len(header)] != header:
            return []
        starts.append(offset)
        offset += len(header) + len(raw)
    return [*starts, offset]


def write_state_file(path: Path, snapshot: Snapshot) -> None:
    """Write to a temp file in the same directory, fsync, then rename over the old file.

    A crash at any point leaves either the old file or the new one, never a mix.
    """
    write_state_bytes(path, encode(snapshot))


def write_state_bytes(path: Path, data: bytes) -> None:
    _write_atomically(path, (data,))


async def write_state_bytes_async(path: Path, data: bytes) -> None:
    """The write (and its fsyncs) in a thread, off the event loop."""
    await asyncio.to_thread(write_state_bytes, path, data)


COPY_BYTES = 1 << 20


class StreamedStateFile:
    """A state file written while its snapshot is built: each prefix slice goes, in a thread,
    to an unnamed temp file the moment it is encoded, and the file is put together once the
    slice count its head carries is known. Holding every part until the write took RSS from
    89 to 103-108 MB with a full 200k-entry index (benchmarks/bench_memory.py)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._slices: IO[bytes] | None = None
        self.slice_count = 0

    async def add_slice(self, raw: Buffer) -> None:
        await asyncio.to_thread(self._append, raw)
        self.slice_count += 1

    def _append(self, raw: Buffer) -> None:
        if self._slices is None:  # unnamed (O_TMPFILE): nothing left behind by a kill
            self._slices = tempfile.TemporaryFile(dir=self._path.parent)  # noqa: SIM115 (close())
        self._slices.write(slice_head(raw))
        self._slices.write(raw)

    async def finish(self, head: bytes, tail: Sequence[Buffer]) -> None:
        """Write head, the slices so far, then tail, atomically over the state file."""
        await asyncio.to_thread(_write_atomically, self._path, self._parts(head, tail))

    def _parts(self, head: bytes, tail: Sequence[Buffer]) -> Iterator[Buffer]:
        yield head
        if self._slices is not None:
            self._slices.seek(0)
            while chunk := self._slices.read(COPY_BYTES):
                yield chunk
        yield from tail

    def close(self) -> None:
        if self._slices is not None:
            self._slices.close()
            self._slices = None


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


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


def _write_atomically(path: Path, parts: Iterable[Buffer]) -> None:
    directory = path.parent
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(path), suffix=_TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as temp_file:
            for part in parts:
                temp_file.write(part)
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
