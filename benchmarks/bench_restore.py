"""State file restore memory: process RSS after restoring a full 200k-entry prefix index.

Run: .venv/bin/python benchmarks/bench_restore.py
Prints `mem restore-200k rss_mb=N peak_rss_mb=N` (current RSS after the restore and a
gc, and the peak during it; each in a fresh interpreter, 4 slots per entry: the worst
case) and `mem filled-200k rss_mb=N`, the same index filled live, for comparison.
Issue 11's budget: 120 MB after a restore.
"""

from __future__ import annotations

import gc
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from pharos.clock import FakeClock
from pharos.peer.statefile import StateSnapshot, read_state_file, write_state_file
from pharos.prefix import DEFAULT_CAP_ENTRIES, MAX_SLOTS, Chain, PrefixIndex, Source

SLICE_ENTRIES = 2000  # as cmd/runtime.py restores


def _key(target_id: int) -> str:
    return f"http://backend-{target_id}:8000 qwen2.5-coder-7b-instruct"


def _fill(index: PrefixIndex) -> None:
    for n in range(index.cap_entries):
        chain = Chain(((n * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF,), (1000,))
        for target_id in range(MAX_SLOTS):
            index.record(chain, target_id, 7, float(n), Source.PEER)


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def write(path: Path) -> None:
    index = PrefixIndex(DEFAULT_CAP_ENTRIES, clock=FakeClock())
    _fill(index)
    write_state_file(path, StateSnapshot(prefix=index.export(_key)))


def restore(path: Path) -> None:
    index = PrefixIndex(DEFAULT_CAP_ENTRIES, clock=FakeClock())
    snapshot = read_state_file(path)
    assert snapshot is not None
    entries = snapshot.prefix
    for end in range(len(entries), 0, -SLICE_ENTRIES):
        index.restore(
            entries[max(0, end - SLICE_ENTRIES) : end],
            lambda key: int(key.split("-")[1].split(":")[0]),
            lambda _target_id: 7,
        )
    del snapshot, entries
    gc.collect()
    assert len(index) == DEFAULT_CAP_ENTRIES
    print(f"mem restore-200k rss_mb={_rss_mb():.1f} peak_rss_mb={_peak_rss_mb():.1f}")


def filled() -> None:
    index = PrefixIndex(DEFAULT_CAP_ENTRIES, clock=FakeClock())
    _fill(index)
    gc.collect()
    print(f"mem filled-200k rss_mb={_rss_mb():.1f} peak_rss_mb={_peak_rss_mb():.1f}")


def main() -> None:
    if len(sys.argv) == 3:
        {"--write": write, "--restore": restore}[sys.argv[1]](Path(sys.argv[2]))
        return
    if sys.argv[1:] == ["--filled"]:
        filled()
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pharos.state"
        for step in ("--write", "--restore"):
            subprocess.run([sys.executable, __file__, step, str(path)], check=True)
        print(f"info restore-200k state_file_mb={path.stat().st_size / (1024 * 1024):.1f}")
    subprocess.run([sys.executable, __file__, "--filled"], check=True)


if __name__ == "__main__":
    main()
