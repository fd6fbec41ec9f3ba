"""Wire version 1 (spec §12, §14 layer 2): recorded samples decode forever, unknown fields are
ignored, another proto is refused by name, and snapshot slices survive a bad neighbour."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from pharos.peer.statefile import read_state_file
from pharos.peer.wire import (
    SLICE_ENTRIES,
    Delta,
    ProtoMismatch,
    Snapshot,
    WireError,
    decode_delta,
    decode_snapshot,
    encode,
    encode_entries,
    entry_slices,
    slice_entries,
)
from pharos.prefix import ExportedSlot, PrefixEntry, PrefixOp
from pharos.sched import Gauges
from pharos.state import StatRecord
from pharos.usage import DAY, MINUTE, Cell

PROTO1 = Path(__file__).parent / "testdata" / "proto1"
OLLAMA = "http://gpu-box:11434 qwen2.5:3b"
VLLM = "http://gpu-box:8000 llama3.1:8b"


def test_the_recorded_proto1_delta_decodes() -> None:
    delta = decode_delta((PROTO1 / "delta.msgpack").read_bytes())
    assert delta == Delta(
        proto=1,
        origin=2**64 - 3,
        fingerprint=0x1234_5678_9ABC_DEF0,
        leaving=False,
        gauges=Gauges(inflight={OLLAMA: 2}, waiting={"qwen2.5:3b": 1}, seq=1_790_000_100_000_000),
        cells=[
            Cell(
                origin=2**64 - 3,
                kind=DAY,
                bucket=20724,
                key="alice",
                model="qwen2.5:3b",
                requests=4,
                prompt_tokens=900,
                cached_tokens=300,
                completion_tokens=120,
            ),
            Cell(origin=2**64 - 3, kind=MINUTE, bucket=29833334, key="alice", requests=2),
        ],
        prefix=[
            PrefixOp(target_key=OLLAMA, hashes=[1, 2**64 - 1], last_used_s=1_790_000_100.25),
            PrefixOp(target_key=VLLM, hashes=[7], last_used_s=1_790_000_090.0, remove=True),
        ],
    )


def test_the_recorded_proto1_leaving_delta_decodes() -> None:
    delta = decode_delta((PROTO1 / "delta-leaving.msgpack").read_bytes())
    assert delta.leaving is True
    assert delta.gauges == Gauges(seq=1_790_000_200_000_000)
    assert [c.requests for c in delta.cells] == [5]
    assert delta.prefix == []


def test_the_recorded_proto1_snapshot_decodes_slice_by_slice() -> None:
    snapshot = decode_snapshot((PROTO1 / "snapshot.msgpack").read_bytes())
    assert snapshot.proto == 1 and snapshot.prefix == []
    assert [entry for batch in entry_slices(snapshot) for entry in batch] == [
        PrefixEntry(hash=2**64 - 2, slots=[ExportedSlot(OLLAMA, 1_790_000_100.5)]),
        PrefixEntry(
            hash=99,
            slots=[ExportedSlot(OLLAMA, 1_790_000_050.0), ExportedSlot(VLLM, 1_790_000_040.0)],
        ),
        PrefixEntry(hash=5, slots=[ExportedSlot(VLLM, 1_789_999_000.0)]),
    ]
    assert snapshot.cells == [
        Cell(
            origin=42,
            kind=DAY,
            bucket=20723,
            key="ops",
            model="llama3.1:8b",
            requests=3,
            prompt_tokens=90,
            completion_tokens=30,
            unmetered=1,
        )
    ]
    assert snapshot.stats == [StatRecord(key=OLLAMA, prefill_s_per_token=0.0004, load_s=2.5)]


def test_the_recorded_proto1_state_file_with_a_plain_prefix_list_still_reads() -> None:
    snapshot = read_state_file(PROTO1 / "state.msgpack")
    assert snapshot is not None
    assert [entry.hash for batch in entry_slices(snapshot) for entry in batch] == [2**64 - 2, 12345]
    assert snapshot.stats[0] == StatRecord(key=OLLAMA, prefill_s_per_token=0.0004, load_s=2.5)


def test_stat_records_keep_the_wire_name_target_key() -> None:
    raw = msgspec.msgpack.decode(encode(Snapshot(stats=[StatRecord(key="t", load_s=1.0)])))
    assert raw["stats"] == [
        {"target_key": "t", "prefill_s_per_token": None, "load_s": 1.0, "service_s": None}
    ]


def test_a_newer_peers_extra_fields_are_ignored() -> None:
    newer = msgspec.msgpack.encode(
        {
            "proto": 1,
            "origin": 5,
            "leaving": False,
            "gauges": {"inflight": {"t": 1}, "waiting": {}, "seq": 3, "queued_tokens": 9},
            "cells": [{"origin": 5, "kind": DAY, "bucket": 1, "key": "k", "hourly": [1]}],
            "prefix": [{"target_key": "t", "hashes": [1], "last_used_s": 2.0, "weight": 3}],
            "tls": {"cert": "later"},
        }
    )
    delta = decode_delta(newer)
    assert delta.origin == 5 and delta.gauges.inflight == {"t": 1}
    assert delta.cells == [Cell(origin=5, kind=DAY, bucket=1, key="k")]
    assert delta.prefix == [PrefixOp(target_key="t", hashes=[1], last_used_s=2.0)]


# message                                  | what the error names
@pytest.mark.parametrize(
    ("data", "match"),
    [
        (msgspec.msgpack.encode({"proto": 2, "origin": 1}), "wire version 2, this Pharos reads 1"),
        (b"", "not a Pharos delta"),
        (b"\xc1", "not a Pharos delta"),
        (msgspec.msgpack.encode([1, 2]), "not a Pharos delta"),
        (msgspec.msgpack.encode({"proto": 1, "origin": "x"}), "not a Pharos delta"),
        (msgspec.msgpack.encode({"proto": 1, "origin": -1, "cells": 3}), "not a Pharos delta"),
    ],
)
def test_a_bad_delta_is_a_clear_error(data: bytes, match: str) -> None:
    with pytest.raises(WireError, match=match):
        decode_delta(data, source="peer delta")


def test_a_future_proto_is_a_proto_mismatch_naming_both_versions() -> None:
    data = msgspec.msgpack.encode({"proto": 3})
    with pytest.raises(ProtoMismatch, match="wire version 3, this Pharos reads 2") as caught:
        decode_snapshot(data, proto=2)
    assert caught.value.proto == 3


def test_a_corrupt_slice_is_skipped_and_the_others_still_decode() -> None:
    good = [PrefixEntry(hash=i, slots=[ExportedSlot("t", float(i))]) for i in range(3)]
    snapshot = Snapshot(
        prefix_slices=[encode_entries(good[:2]), memoryview(b"\xc1junk"), encode_entries(good[2:])]
    )
    assert [e for batch in entry_slices(decode_snapshot(encode(snapshot))) for e in batch] == good


def test_entries_are_sliced_in_order_and_no_slice_is_over_the_limit() -> None:
    entries = [PrefixEntry(hash=i, slots=[]) for i in range(2 * SLICE_ENTRIES + 7)]
    slices = list(slice_entries(entries))
    assert [len(s) for s in slices] == [SLICE_ENTRIES, SLICE_ENTRIES, 7]
    assert [e for s in slices for e in s] == entries
