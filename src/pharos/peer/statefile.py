"""The state file: the §12 Snapshot (peer/wire.py) written atomically and read back.

One format for the state file and GET /peer/snapshot, so one restore path serves
both (peer/restore.py).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from contextlib import suppress
from pathlib import Path

from pharos.peer.wire import Snapshot, WireError, decode_snapshot, encode


class StateFileError(Exception):
    """The state file exists but can't be used; the caller logs it and starts empty."""


def read_state_file(path: Path) -> Snapshot | None:
    """None when there is no file; StateFileError when it can't be read or decoded."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StateFileError(f"{path}: can't read the state file ({error})") from error
    try:
        return decode_snapshot(data, source=str(path))
    except WireError as error:
        raise StateFileError(str(error)) from error


def write_state_file(path: Path, snapshot: Snapshot) -> None:
    """Write to a temp file in the same directory, fsync, then rename over the old file.

    A crash at any point leaves either the old file or the new one, never a mix.
    """
    write_state_bytes(path, encode(snapshot))


def write_state_bytes(path: Path, data: bytes) -> None:
    _write_atomically(path, data)


async def read_state_file_async(path: Path) -> Snapshot | None:
    return await asyncio.to_thread(read_state_file, path)


async def write_state_bytes_async(path: Path, data: bytes) -> None:
    """The write (and its fsyncs) in a thread, off the event loop."""
    await asyncio.to_thread(write_state_bytes, path, data)


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
