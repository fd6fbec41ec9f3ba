"""The state file is mapped, not read whole, and each prefix slice's pages go back once it is
merged (peer/statefile.py MappedStateFile): restoring a full index peaked 17 MB over where it
ended (benchmarks/bench_memory.py: 106.9 against 89.5 MB)."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from pharos.peer.restore import merge_snapshot
from pharos.peer.statefile import StateFileError, open_state_file, write_state_bytes
from pharos.peer.wire import Snapshot, encode, encode_entries, entry_slices, snapshot_parts
from pharos.prefix.wire import ExportedSlot, PrefixEntry
from tests.peer.snapshots import TARGETS
from tests.peer.test_snapshot_slices import sharded

SLICES = 40
ENTRIES_PER_SLICE = 400  # ~10 pages a slice


def entries(start: int) -> list[PrefixEntry]:
    return [
        PrefixEntry(hash=n * 7919 + 3, slots=[ExportedSlot(TARGETS[0], 1_700_000_000.0 + n)])
        for n in range(start, start + ENTRIES_PER_SLICE)
    ]


def sliced_file(tmp_path: Path) -> tuple[Path, list[list[PrefixEntry]]]:
    batches = [entries(i * ENTRIES_PER_SLICE) for i in range(SLICES)]
    parts = snapshot_parts([encode_entries(b) for b in batches], [], [])
    path = tmp_path / "pharos.state"
    write_state_bytes(path, b"".join(parts))
    return path, batches


def resident_kb(path: Path) -> int:
    """The Rss of this process's mapping of `path`, from /proc/self/smaps."""
    rss = 0
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = fields[-1] == str(path)
        elif inside and fields[0] == "Rss:":
            rss += int(fields[1])
    return rss


def decoded(snapshot: Snapshot) -> list[list[PrefixEntry]]:
    return list(entry_slices(snapshot))


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
def test_each_merged_slice_gives_its_pages_back_and_still_reads_the_same(tmp_path: Path) -> None:
    path, batches = sliced_file(tmp_path)
    mapped = open_state_file(path)
    assert mapped is not None
    assert decoded(mapped.snapshot) == batches  # every page touched
    touched_kb = resident_kb(path)
    assert touched_kb * 1024 > 0.9 * path.stat().st_size
    for index in range(SLICES - 1, -1, -1):  # merged last first, as restore merges them
        mapped.release(index)
    released_kb = resident_kb(path)
    assert released_kb * 1024 <= 3 * mmap.PAGESIZE  # the head's and the tail's pages
    assert decoded(mapped.snapshot) == batches  # released pages read back from the file


def test_a_file_in_the_older_layout_opens_and_releases_nothing(tmp_path: Path) -> None:
    path = tmp_path / "pharos.state"
    legacy = entries(0)
    write_state_bytes(path, encode(Snapshot(prefix=legacy)))
    mapped = open_state_file(path)
    assert mapped is not None
    assert mapped.snapshot.prefix == legacy
    mapped.release(0)  # nothing to release: no error
    assert mapped.snapshot.prefix == legacy


# (file bytes, what open_state_file does)
BAD = [
    (b"", "empty"),
    (b"\x85\xa5proto", "cut short"),
    (b"not msgpack at all", "garbage"),
]


@pytest.mark.parametrize(("data", "_why"), BAD)
def test_a_file_that_is_not_a_state_file_is_a_state_file_error(
    tmp_path: Path, data: bytes, _why: str
) -> None:
    path = tmp_path / "pharos.state"
    path.write_bytes(data)
    with pytest.raises(StateFileError, match=r"pharos\.state"):
        open_state_file(path)


def test_no_file_is_none(tmp_path: Path) -> None:
    assert open_state_file(tmp_path / "missing.state") is None


async def test_restore_reports_each_slice_merged_last_first(tmp_path: Path) -> None:
    path, batches = sliced_file(tmp_path)
    mapped = open_state_file(path)
    assert mapped is not None
    merged: list[int] = []
    shared = sharded()
    before = len(shared.prefix)
    restored = await merge_snapshot(shared, mapped.snapshot, merged.append)
    assert merged == list(range(SLICES - 1, -1, -1))
    assert restored == sum(len(b) for b in batches)
    assert len(shared.prefix) > before
