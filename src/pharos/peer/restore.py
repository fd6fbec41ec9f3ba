"""Snapshots: built, merged and saved in slices; one restore path for the state file,
peers at startup and peers on reconnect (spec §12).

Merging is idempotent and commutative in every owning package, so restoring the
same snapshot twice, or from several sources in any order, is safe. Each step
between two yields to the event loop handles one slice (SLICE_ENTRIES prefix
entries): benchmarks/bench_peer.py measures the longest step.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pharos.peer.statefile import (
    MappedStateFile,
    StateFileError,
    StreamedStateFile,
    open_state_file,
)
from pharos.peer.wire import (
    SLICE_ENTRIES,
    Buffer,
    Snapshot,
    encode_entries,
    entry_slices,
    snapshot_head,
    snapshot_parts,
    snapshot_tail,
)
from pharos.prefix import PrefixEntry, PrefixIndex
from pharos.sched import Scheduler
from pharos.state import State
from pharos.usage import UsageBook

log = logging.getLogger("pharos.peer")

STATE_FILE_INTERVAL_S = 30.0
CELL_SLICE = 250
"""Usage cells merged between two yields: 1,000 took ~3 ms a step and the loop-lag monitor saw
7.2 ms during a 200k-entry merge; 250: 0.9 ms max step, 1.8 ms max lag (bench_peer.py)."""
MERGE_STEP = 250
"""Prefix entries restored between two yields: half a wire slice, ~1.5 ms (bench_peer.py)."""


@dataclass(frozen=True)
class Shared:
    """The state peers share, each part merged by the package that owns it."""

    prefix: PrefixIndex
    state: State
    usage: UsageBook
    sched: Scheduler


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a snapshot is built or merged, young collections
    only between slices: the objects made are acyclic (freed by refcount), and a full
    collection traversing a 200k-entry index stalled the loop 8-50 ms at a time while
    slices arrived; paused, the longest step is a few ms (benchmarks/bench_peer.py)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


async def _yield() -> None:
    gc.collect(0)
    await asyncio.sleep(0)


async def build_snapshot(shared: Shared) -> list[Buffer]:
    """The encoded snapshot as parts to write in order (never joined on the loop), prefix
    entries most recent first per shard, exported and encoded a slice at a time (a full
    index in one go stalls the loop for ~1 s).

    Never torn: cells, stats and the index's copy-before-write export (PrefixIndex.
    export_batches) are all taken in one loop step, before the first await, so the parts
    are the state at that instant whatever is recorded or merged while they are built."""
    with collector_paused():
        return await _build(shared)


PARTS_PER_STEP = 8
"""Parts made between two yields: 4 slices, or 8 x CELLS_PER_PART cells (~2 ms)."""


async def _build(shared: Shared) -> list[Buffer]:
    cells = shared.usage.export_snapshot()
    stats = shared.state.export_stats()
    slices: list[memoryview] = []
    batches = shared.prefix.export_batches(
        shared.state.key_of, shared.state.generation_of, batch_entries=SLICE_ENTRIES
    )
    try:
        for batch in batches:  # the first batch fixes the instant, in this same step
            if batch:
                slices.append(encode_entries(batch))
            await _yield()
    finally:
        batches.close()
    parts: list[Buffer] = []
    for part in snapshot_parts(slices, cells, stats):
        parts.append(part)
        if len(parts) % PARTS_PER_STEP == 0:
            await _yield()
    return parts


async def merge_snapshot(
    shared: Shared, snapshot: Snapshot, merged_slice: Callable[[int], None] | None = None
) -> int:
    """Merge a snapshot in slices, oldest prefix entries first (so its most recent stay most
    recent here); returns how many prefix entries it carried. `merged_slice(i)` after
    prefix slice i (MappedStateFile.release)."""
    with collector_paused():
        return await _merge(shared, snapshot, merged_slice)


async def _merge(
    shared: Shared, snapshot: Snapshot, merged_slice: Callable[[int], None] | None
) -> int:
    cells = snapshot.cells
    for start in range(0, len(cells), CELL_SLICE):
        shared.usage.merge(cells[start : start + CELL_SLICE])
        await _yield()
    entries = 0
    for index, batch in _oldest_slices_first(snapshot):
        await _yield()  # decoding the slice was this step's work: restore it in the next ones
        for end in range(len(batch), 0, -MERGE_STEP):  # the slice's older half first
            part = batch[max(0, end - MERGE_STEP) : end]
            shared.prefix.restore(part, shared.state.target_id_of, shared.state.generation_of)
            await _yield()
        entries += len(batch)
        if merged_slice is not None and index is not None:
            merged_slice(index)
    shared.state.restore_stats(snapshot.stats)
    return entries


def _oldest_slices_first(snapshot: Snapshot) -> Iterator[tuple[int | None, list[PrefixEntry]]]:
    """Slices in reverse order, with their index in prefix_slices (None: the older `prefix`
    list); raw slices are decoded one at a time as they are reached."""
    legacy = [
        snapshot.prefix[start : start + SLICE_ENTRIES]
        for start in range(0, len(snapshot.prefix), SLICE_ENTRIES)
    ]
    for index in range(len(snapshot.prefix_slices) - 1, -1, -1):
        raw = snapshot.prefix_slices[index]
        for batch in entry_slices(Snapshot(prefix_slices=[raw])):
            yield index, batch
    for batch in reversed(legacy):
        yield None, batch


# ---- the state file (§12 "Warm restart without peers") ---------------------------------


async def restore_state_file(shared: Shared, path: Path) -> bool:
    """Merge the state file if there is one; a corrupt one is logged and startup goes on."""
    try:
        mapped: MappedStateFile | None = await asyncio.to_thread(open_state_file, path)
    except StateFileError as err:
        log.error("state file not restored, starting empty: %s", err)
        return False
    if mapped is None:
        log.info(
            "no state file at %s yet; it is written every %.0fs and on shutdown",
            path,
            STATE_FILE_INTERVAL_S,
        )
        return False
    snapshot = mapped.snapshot
    entries = await merge_snapshot(shared, snapshot, mapped.release)
    log.info(
        "restored %d usage cells, %d prefix entries and %d target stats from %s",
        len(snapshot.cells),
        entries,
        len(snapshot.stats),
        path,
    )
    return True


async def save_state_file(shared: Shared, path: Path) -> bool:
    """Snapshot (in slices, on the loop) and write it in a thread, each slice as soon as it is
    encoded: build_snapshot's bytes, never all held at once. An error is only logged."""
    out = StreamedStateFile(path)
    try:
        with collector_paused():
            await _save(shared, out)
    except OSError as err:
        log.error("could not write the state file %s: %s", path, err)
        return False
    finally:
        out.close()
    return True


async def _save(shared: Shared, out: StreamedStateFile) -> None:
    """_build's steps, the same instant (cells, stats and the first batch in one step)."""
    cells = shared.usage.export_snapshot()
    stats = shared.state.export_stats()
    batches = shared.prefix.export_batches(
        shared.state.key_of, shared.state.generation_of, batch_entries=SLICE_ENTRIES
    )
    try:
        for batch in batches:
            if batch:
                raw = encode_entries(batch)
                del batch
                gc.collect(0)
                await out.add_slice(raw)  # the write is the step's yield
            else:
                await _yield()
    finally:
        batches.close()
    tail: list[Buffer] = []
    for part in snapshot_tail(cells, stats):
        tail.append(part)
        if len(tail) % PARTS_PER_STEP == 0:
            await _yield()
    await out.finish(snapshot_head(out.slice_count), tail)


async def write_state_periodically(
    shared: Shared,
    path: Path | None,
    interval_s: float = STATE_FILE_INTERVAL_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    if path is None:
        return
    while True:
        await sleep(interval_s)
        try:
            await save_state_file(shared, path)
        except Exception:  # a bug here must not end the writer for the process's lifetime
            log.exception("state file write failed; trying again in %.0fs", interval_s)
