import asyncio
import os
from pathlib import Path
from zoneinfo import ZoneInfo

import msgspec
import pytest

from pharos.clock import FakeClock
from pharos.peer.statefile import (
    StateFileError,
    read_state_file,
    sweep_temp_files,
    write_state_bytes_async,
    write_state_file,
)
from pharos.peer.wire import Snapshot, decode_snapshot, encode
from pharos.prefix import ExportedSlot, PrefixEntry
from pharos.state import StatRecord
from pharos.usage import DAY, Cell, UsageBook

PROTO1 = Path(__file__).parent / "testdata" / "proto1" / "state.msgpack"
UTC = ZoneInfo("UTC")


def sample() -> Snapshot:
    return Snapshot(
        prefix=[PrefixEntry(hash=2**64 - 1, slots=[ExportedSlot(target_key="t", last_used_s=5.5)])],
        cells=[
            Cell(origin=3, kind=DAY, bucket=20_000, key="alice", model="m", requests=2),
            Cell(origin=2**64 - 1, kind=DAY, bucket=20_001, key="bob", model="n", unmetered=1),
        ],
        stats=[StatRecord(key="http://a:1 m", load_s=1.5)],
    )


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "pharos.state"
    write_state_file(path, sample())
    loaded = read_state_file(path)
    assert loaded is not None
    assert loaded == sample()
    assert [p.name for p in tmp_path.iterdir()] == ["pharos.state"]


async def test_async_round_trip_runs_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "pharos.state"
    await write_state_bytes_async(path, encode(sample()))
    loaded = await asyncio.to_thread(read_state_file, path)  # as restore_state_file opens it
    assert loaded is not None
    assert loaded == sample()


def test_missing_file_is_none(tmp_path: Path) -> None:
    assert read_state_file(tmp_path / "absent.state") is None


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\xc1garbage",
        encode(sample())[:-7],  # truncated
        msgspec.msgpack.encode([1, 2, 3]),
        msgspec.msgpack.encode({"proto": 1, "cells": [{"origin": "x"}]}),
        b'{"proto": 1}',
    ],
)
def test_corrupt_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "pharos.state"
    path.write_bytes(content)
    with pytest.raises(StateFileError, match=r"pharos\.state: not a Pharos state snapshot"):
        read_state_file(path)


def test_an_incompatible_wire_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pharos.state"
    path.write_bytes(msgspec.msgpack.encode({"proto": 2, "cells": []}))
    with pytest.raises(StateFileError, match="wire version 2, this Pharos reads 1"):
        read_state_file(path)


def test_unreadable_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StateFileError, match="can't read the state file"):
        read_state_file(tmp_path)  # a directory


def test_unknown_fields_are_ignored_and_missing_ones_default() -> None:
    newer = msgspec.msgpack.encode(
        {
            "proto": 1,
            "cells": [{"origin": 1, "kind": DAY, "bucket": 5, "key": "k", "flavor": "x"}],
            "stats": [{"target_key": "t", "future_ewma": 0.5}],
            "prefix": [{"hash": 9, "slots": [], "future_flag": True}],
            "gauges": {"whatever": [1]},
        }
    )
    snapshot = decode_snapshot(newer)
    assert snapshot.cells == [Cell(origin=1, kind=DAY, bucket=5, key="k")]
    assert snapshot.stats == [StatRecord(key="t")]
    assert snapshot.prefix == [PrefixEntry(hash=9, slots=[])]
    assert decode_snapshot(msgspec.msgpack.encode({})).proto == 1


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_crash_mid_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "pharos.state"
    old = Snapshot(stats=[StatRecord(key="old")])
    write_state_file(path, old)

    def crash(*_args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match="disk gone"):
        write_state_file(path, sample())
    monkeypatch.undo()
    loaded = read_state_file(path)
    assert loaded is not None
    assert loaded.stats == old.stats
    assert [p.name for p in tmp_path.iterdir()] == ["pharos.state"]  # no temp file left


def test_a_temp_file_left_by_a_killed_process_does_not_matter(tmp_path: Path) -> None:
    path = tmp_path / "pharos.state"
    write_state_file(path, sample())
    (tmp_path / ".pharos.state.abc.tmp").write_bytes(encode(sample())[:10])
    loaded = read_state_file(path)
    assert loaded is not None
    assert loaded == sample()
    write_state_file(path, Snapshot())
    assert read_state_file(path) == Snapshot()


def test_recorded_proto1_state_file_decodes() -> None:
    """Written by wire version 1; every later release must keep reading it."""
    snapshot = read_state_file(PROTO1)
    assert snapshot is not None
    assert snapshot.proto == 1
    assert snapshot.prefix == [
        PrefixEntry(
            hash=2**64 - 2,
            slots=[
                ExportedSlot(
                    target_key="http://gpu-box:11434 qwen2.5:3b", last_used_s=1_790_000_100.5
                ),
                ExportedSlot(
                    target_key="http://gpu-box:8000 llama3.1:8b", last_used_s=1_790_000_000.0
                ),
            ],
        ),
        PrefixEntry(
            hash=12345,
            slots=[
                ExportedSlot(
                    target_key="http://gpu-box:11434 qwen2.5:3b", last_used_s=1_789_999_000.25
                )
            ],
        ),
    ]
    assert snapshot.cells == [
        Cell(
            origin=2**64 - 1,
            kind=DAY,
            bucket=20724,
            key="alice",
            model="qwen2.5:3b",
            requests=12,
            prompt_tokens=3400,
            cached_tokens=1200,
            completion_tokens=560,
            unmetered=1,
        ),
        Cell(
            origin=42,
            kind=DAY,
            bucket=20723,
            key="ops",
            model="llama3.1:8b",
            requests=3,
            prompt_tokens=90,
            completion_tokens=30,
        ),
    ]
    assert snapshot.stats == [
        StatRecord(
            key="http://gpu-box:11434 qwen2.5:3b",
            prefill_s_per_token=0.0004,
            load_s=2.5,
            service_s=None,
        ),
        StatRecord(key="http://gpu-box:8000 llama3.1:8b"),
    ]


def test_usage_survives_a_restart_through_the_state_file(tmp_path: Path) -> None:
    clock = FakeClock(start_wall=1_790_000_040.0)
    before = UsageBook(clock, UTC, origin=1)
    before.record_reply("alice", "m", 100, 40, 20)
    before.admit("alice", 10)
    path = tmp_path / "pharos.state"
    write_state_file(path, Snapshot(cells=before.export_snapshot()))

    clock.advance(5)
    after = UsageBook(clock, UTC, origin=2)  # a restart is a new origin
    loaded = read_state_file(path)
    assert loaded is not None
    after.merge(loaded.cells)
    assert after.tokens_today("alice") == 120
    assert after.today_by_key() == before.today_by_key()
    after.record_reply("alice", "m", 1, 0, 1)
    assert after.tokens_today("alice") == 122


def test_temp_files_left_by_killed_writers_are_swept_when_the_file_is_read(
    tmp_path: Path,
) -> None:
    """12 kill -9 during writes left 102 MB of temp files (issue 11); nothing removed them."""
    path = tmp_path / "pharos.state"
    write_state_file(path, sample())
    for index in range(3):
        (tmp_path / f".pharos.state.k{index}.tmp").write_bytes(b"x" * 1000)
    (tmp_path / ".other.state.k9.tmp").write_bytes(b"not ours")
    (tmp_path / "pharos.state.tmp").write_bytes(b"not a temp name of ours")
    assert read_state_file(path) == sample()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".other.state.k9.tmp",
        "pharos.state",
        "pharos.state.tmp",
    ]


def test_sweeping_without_a_state_file_or_directory_is_quiet(tmp_path: Path) -> None:
    (tmp_path / ".pharos.state.k1.tmp").write_bytes(b"x")
    assert read_state_file(tmp_path / "pharos.state") is None
    assert list(tmp_path.iterdir()) == []
    assert sweep_temp_files(tmp_path / "missing" / "pharos.state") == (0, 0)
