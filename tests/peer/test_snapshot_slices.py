"""A snapshot built in slices (spec §12; peer/restore.py) is the state at one instant: records,
peer merges and usage counted between two slices never show up half in it, for the peer
snapshot and the state file alike; its parts are the bytes one encode would make, and the
peer listener streams them."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import cast
from zoneinfo import ZoneInfo

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.peer.restore import Shared, build_snapshot, save_state_file
from pharos.peer.server import peer_listener
from pharos.peer.statefile import read_state_file
from pharos.peer.wire import Snapshot, decode_snapshot, encode, entry_slices, snapshot_parts
from pharos.prefix import PrefixIndex, PrefixOp
from pharos.prefix.index import SHARD_MIN_CAP
from pharos.sched import Scheduler
from pharos.state import State
from pharos.usage import UsageBook
from tests.peer.mesh import ADDRESSES, MODEL, SECRET, Mesh, MeshFactory
from tests.peer.snapshots import TARGETS, WALL_S, Targets, cell_st, entry_st, stat_st

ENTRIES = 3_000


def sharded() -> Shared:
    clock = FakeClock(start_wall=WALL_S)
    shared = Shared(
        prefix=PrefixIndex(cap_entries=SHARD_MIN_CAP, clock=clock),
        state=cast(State, Targets()),
        usage=UsageBook(clock, ZoneInfo("UTC"), origin=1),
        sched=cast(Scheduler, None),
    )
    for n in range(ENTRIES):
        op = PrefixOp(TARGETS[n % 3], [n * 7919 + 3], WALL_S - 900 + n / 10)
        shared.prefix.merge([op], shared.state.target_id_of, shared.state.generation_of)
    for n in range(40):
        shared.usage.record_reply(f"key-{n}", "m", 100, 10, 20)
    return shared


async def busy(shared: Shared, stop: asyncio.Event) -> int:
    """What the loop does between two slices: new records, peer merges, counted replies."""
    steps = 0
    while not stop.is_set():
        steps += 1
        ops = [
            PrefixOp(TARGETS[steps % 3], [steps * 7919 + 3], WALL_S),  # an existing entry
            PrefixOp(TARGETS[0], [10**12 + steps], WALL_S),  # a new one
            PrefixOp(TARGETS[1], [(steps * 31) * 7919 + 3], WALL_S, remove=True),
        ]
        shared.prefix.merge(ops, shared.state.target_id_of, shared.state.generation_of)
        shared.usage.record_reply(f"key-{steps % 50}", "m", 7, 0, 3)
        await asyncio.sleep(0)
    return steps


def prefix_of(snapshot: Snapshot) -> list[object]:
    return [entry for batch in entry_slices(snapshot) for entry in batch]


async def test_a_snapshot_is_the_state_when_it_began_while_the_loop_keeps_changing_it() -> None:
    shared = sharded()
    stop = asyncio.Event()
    changer = asyncio.create_task(busy(shared, stop))
    await asyncio.sleep(0)  # the changer's first step; from here on it runs between slices
    expected_prefix = shared.prefix.export(shared.state.key_of, shared.state.generation_of)
    expected_cells = shared.usage.export_snapshot()
    parts = await build_snapshot(shared)
    stop.set()
    steps = await changer
    assert steps > 20  # the loop really ran between the slices
    snapshot = decode_snapshot(b"".join(parts))
    assert prefix_of(snapshot) == expected_prefix
    assert snapshot.cells == expected_cells
    after = shared.prefix.export(shared.state.key_of, shared.state.generation_of)
    assert after != expected_prefix  # ...and the index did change meanwhile


async def test_the_state_file_written_while_the_loop_runs_is_never_torn(tmp_path: Path) -> None:
    shared = sharded()
    stop = asyncio.Event()
    changer = asyncio.create_task(busy(shared, stop))
    await asyncio.sleep(0)
    expected = shared.prefix.export(shared.state.key_of, shared.state.generation_of)
    assert await save_state_file(shared, tmp_path / "pharos.state")
    stop.set()
    await changer
    saved = read_state_file(tmp_path / "pharos.state")
    assert saved is not None and prefix_of(saved) == expected


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(st.lists(entry_st, max_size=5), max_size=20),
    cells=st.lists(cell_st, max_size=1_200),
    stats=st.lists(stat_st, max_size=3),
)
def test_the_parts_are_the_bytes_one_encode_makes(
    entries: list[list[object]], cells: list[object], stats: list[object]
) -> None:
    from pharos.peer.wire import encode_entries

    slices = [encode_entries(batch) for batch in entries]  # type: ignore[arg-type]
    whole = encode(Snapshot(prefix_slices=slices, cells=cells, stats=stats))  # type: ignore[arg-type]
    assert b"".join(snapshot_parts(slices, cells, stats)) == whole  # type: ignore[arg-type]


async def test_the_listener_streams_a_snapshot_that_decodes_to_the_index(
    mesh: MeshFactory,
) -> None:
    m: Mesh = await mesh(engines=1)
    a = await m.start(ADDRESSES[0], origin=77, pull=False)
    shared = a.pharos.shared
    target_key = f"{m.urls[0]} {MODEL}"
    assert shared.state.target_id_of(target_key) is not None
    ops = [PrefixOp(target_key, [n * 7919 + 1], WALL_S) for n in range(2_000)]
    shared.prefix.merge(ops, shared.state.target_id_of, shared.state.generation_of)
    expected = shared.prefix.export(shared.state.key_of, shared.state.generation_of)
    async with (
        peer_listener(a.node, "127.0.0.1", 0) as (address,),
        aiohttp.ClientSession() as client,
        client.get(
            f"http://{address}/peer/snapshot",
            headers={"Authorization": f"Bearer {SECRET.decode()}"},
        ) as reply,
    ):
        assert reply.status == 200 and reply.headers["Pharos-Origin"] == "77"
        body = await reply.read()
    assert int(reply.headers["Content-Length"]) == len(body)
    assert len(expected) == 2_000 and prefix_of(decode_snapshot(body)) == expected


async def test_a_peer_hanging_up_mid_snapshot_logs_no_error_and_the_listener_goes_on(
    mesh: MeshFactory, caplog: pytest.LogCaptureFixture
) -> None:
    m: Mesh = await mesh(engines=1)
    a = await m.start(ADDRESSES[0], origin=77, pull=False)
    shared = a.pharos.shared
    target_key = f"{m.urls[0]} {MODEL}"
    ops = [PrefixOp(target_key, [n * 7919 + 1], WALL_S) for n in range(30_000)]
    shared.prefix.merge(ops, shared.state.target_id_of, shared.state.generation_of)
    caplog.set_level(logging.DEBUG)
    auth = f"Bearer {SECRET.decode()}".encode()
    async with peer_listener(a.node, "127.0.0.1", 0) as (address,):
        host, port = address.rsplit(":", 1)
        for _ in range(3):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"GET /peer/snapshot HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth)
            writer.write(b"\r\n\r\n")
            await reader.readexactly(4096)  # the headers and the first part, then gone
            writer.transport.abort()
            await asyncio.sleep(0.2)
        async with (
            aiohttp.ClientSession() as client,
            client.get(
                f"http://{address}/peer/snapshot", headers={"Authorization": auth.decode()}
            ) as reply,
        ):
            assert reply.status == 200 and len(await reply.read()) > 100_000
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_the_state_file_written_slice_by_slice_is_the_snapshot_one_encode_makes(
    tmp_path: Path,
) -> None:
    """save_state_file writes each slice as it is encoded (peer/statefile.StreamedStateFile)
    and the head last: the file must still be build_snapshot's bytes, with no temp file left."""
    shared = sharded()
    path = tmp_path / "pharos.state"
    assert await save_state_file(shared, path)
    assert path.read_bytes() == b"".join(bytes(part) for part in await build_snapshot(shared))
    assert os.listdir(tmp_path) == ["pharos.state"]
    saved = read_state_file(path)
    expected = shared.prefix.export(shared.state.key_of, shared.state.generation_of)
    assert saved is not None and len(saved.prefix_slices) > 1 and prefix_of(saved) == expected


async def test_a_state_file_write_that_fails_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = sharded()
    path = tmp_path / "pharos.state"
    path.write_bytes(b"old")

    def no_space(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    assert not await save_state_file(shared, path)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["pharos.state"]


async def test_a_state_file_write_cancelled_midway_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path,
) -> None:
    """Shutdown may cancel the periodic write between two slices (each written in a thread)."""
    shared = sharded()
    path = tmp_path / "pharos.state"
    path.write_bytes(b"old")
    save = asyncio.create_task(save_state_file(shared, path))
    for _ in range(3):  # into the slices: the index has 3,000 entries in 32 shards
        await asyncio.sleep(0)
    assert not save.done()
    save.cancel()
    with pytest.raises(asyncio.CancelledError):
        await save
    await asyncio.get_running_loop().shutdown_default_executor()  # a write in flight ends
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["pharos.state"]
