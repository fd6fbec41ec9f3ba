"""Peer ops, snapshots and their merge rules (spec §6 Replication, §12)."""

from __future__ import annotations

import math
from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.prefix import (
    ExportedSlot,
    Match,
    PrefixEntry,
    PrefixIndex,
    PrefixOp,
    Source,
    chain_for_chat,
)

MODEL = "qwen2.5:0.5b"
CHAIN = chain_for_chat(
    MODEL, None, [("system", "Be terse."), ("user", "Hi"), ("assistant", "Hello.")]
)
KEYS = {"http://a:11434 qwen": 1, "http://b:8080 qwen": 2, "http://c:8000 qwen": 3}
KEY_OF = {target_id: key for key, target_id in KEYS.items()}
A, B, C = KEYS


def _generation(gen: int | None = 1) -> Callable[[int], int | None]:
    return lambda target_id: gen if target_id in KEY_OF else None


def _memberships(index: PrefixIndex) -> set[tuple[int, int]]:
    return {(hash_, slot.target_id) for hash_ in index for slot in index.slots(hash_)}


def test_merge_applies_records_as_peer_slots_stamped_with_our_generation() -> None:
    clock = FakeClock()
    index = PrefixIndex(clock=clock)
    op = PrefixOp(A, list(CHAIN.hashes), clock.time() - 5.0)

    index.merge([op], KEYS.get, _generation(7))

    assert index.lookup(CHAIN, _generation(7)) == {1: Match(CHAIN.cum_bytes[-1], Source.PEER)}
    slot = index.slots(CHAIN.hashes[0])[0]
    assert slot.generation == 7
    assert slot.last_used_s == pytest.approx(clock.now() - 5.0)


def test_merge_drops_ops_for_unknown_targets_and_unknown_generations() -> None:
    index = PrefixIndex(clock=FakeClock())
    index.merge([PrefixOp("http://gone:1 qwen", list(CHAIN.hashes), 0.0)], KEYS.get, _generation())
    index.merge([PrefixOp(A, list(CHAIN.hashes), 0.0)], KEYS.get, _generation(None))
    assert len(index) == 0


def test_merge_removal_forgets_the_target() -> None:
    clock = FakeClock()
    index = PrefixIndex(clock=clock)
    index.record(CHAIN, 1, 1, clock.now())
    index.record(CHAIN, 2, 1, clock.now())

    index.merge(
        [PrefixOp(A, list(CHAIN.hashes), clock.time(), remove=True)], KEYS.get, _generation()
    )

    assert set(index.lookup(CHAIN, _generation())) == {2}


@pytest.mark.parametrize("bad_wall_s", [math.nan, math.inf, 1e18])
def test_merge_never_takes_a_peer_time_in_the_future(bad_wall_s: float) -> None:
    clock = FakeClock()
    index = PrefixIndex(clock=clock)
    index.merge([PrefixOp(A, [42], bad_wall_s)], KEYS.get, _generation())
    assert index.slots(42)[0].last_used_s == clock.now()


def test_export_lists_live_entries_most_recent_first_in_wall_time() -> None:
    clock = FakeClock()
    index = PrefixIndex(cap_entries=1_000, clock=clock)  # one LRU (tests/prefix/test_shards.py)
    index.record(CHAIN, 1, 1, clock.now() - 30.0)
    index.record(chain_for_chat(MODEL, None, [("user", "other")]), 2, 1, clock.now() - 10.0)
    index.record(chain_for_chat(MODEL, None, [("user", "orphan")]), 9, 1, clock.now())

    entries = index.export(KEY_OF.get)

    other = chain_for_chat(MODEL, None, [("user", "other")]).hashes[0]
    wall_s = clock.time()
    assert entries[0] == PrefixEntry(other, [ExportedSlot(B, wall_s - 10.0)])
    assert [entry.hash for entry in entries[1:]] == list(reversed(CHAIN.hashes))
    assert all(entry.slots == [ExportedSlot(A, wall_s - 30.0)] for entry in entries[1:])


def test_export_with_generations_leaves_stale_slots_out() -> None:
    index = PrefixIndex(clock=FakeClock())
    index.record(CHAIN, 1, 1, 1.0)
    index.record(CHAIN, 2, 4, 1.0)
    generations = {1: 2, 2: 4}
    entries = index.export(KEY_OF.get, generations.get)
    assert {slot.target_key for entry in entries for slot in entry.slots} == {B}


def test_export_restore_round_trip_through_msgpack() -> None:
    sender_clock = FakeClock(start_monotonic=50.0)
    sender = PrefixIndex(clock=sender_clock)
    other = chain_for_chat(MODEL, None, [("user", "a different chat")])
    sender.record(CHAIN, 1, 1, sender_clock.now() - 20.0)
    sender.record(CHAIN, 2, 1, sender_clock.now() - 10.0, Source.PEER)
    sender.record(other, 3, 1, sender_clock.now() - 5.0)
    snapshot = msgspec.msgpack.encode(sender.export(KEY_OF.get))

    receiver_clock = FakeClock(start_monotonic=9_000.0)  # same wall clock, other monotonic
    receiver = PrefixIndex(clock=receiver_clock)
    receiver_ids = {A: 11, B: 12, C: 13}
    receiver_keys = {target_id: key for key, target_id in receiver_ids.items()}
    generations = {11: 3, 12: 3, 13: 3}
    receiver.restore(
        msgspec.msgpack.decode(snapshot, type=list[PrefixEntry]), receiver_ids.get, generations.get
    )

    assert receiver.lookup(CHAIN, generations.get) == {
        11: Match(CHAIN.cum_bytes[-1], Source.RESTORED),
        12: Match(CHAIN.cum_bytes[-1], Source.RESTORED),
    }
    assert receiver.export(receiver_keys.get) == sender.export(KEY_OF.get)
    assert receiver.slots(other.hashes[0])[0].last_used_s == pytest.approx(9_000.0 - 5.0)


def test_restore_into_a_smaller_index_keeps_the_most_recent_entries() -> None:
    clock = FakeClock()
    sender = PrefixIndex(cap_entries=1_000, clock=clock)  # one LRU: its order is global
    for hash_ in range(10):
        sender.merge([PrefixOp(A, [hash_], clock.time() - 100 + hash_)], KEYS.get, _generation())
    small = PrefixIndex(cap_entries=3, clock=clock)
    small.restore(sender.export(KEY_OF.get), KEYS.get, _generation())
    assert list(small) == [7, 8, 9]


def test_restore_is_idempotent() -> None:
    clock = FakeClock()
    sender = PrefixIndex(clock=clock)
    sender.record(CHAIN, 1, 1, clock.now() - 1.0)
    sender.record(CHAIN, 2, 1, clock.now() - 2.0)
    snapshot = sender.export(KEY_OF.get)
    receiver = PrefixIndex(clock=clock)
    receiver.restore(snapshot, KEYS.get, _generation())
    once = receiver.export(KEY_OF.get)
    receiver.restore(snapshot, KEYS.get, _generation())
    assert receiver.export(KEY_OF.get) == once


def test_a_wire_op_from_a_newer_peer_with_extra_fields_still_decodes() -> None:
    wire = msgspec.msgpack.encode(
        {"target_key": A, "hashes": [1, 2**64 - 1], "last_used_s": 5.0, "remove": False, "x": 1}
    )
    op = msgspec.msgpack.decode(wire, type=PrefixOp)
    assert op == PrefixOp(A, [1, 2**64 - 1], 5.0)


# Property tests. What holds under replication (spec §12) and what is tested:
# - the same set of record ops, applied in any order and any number of times, gives the same
#   memberships (hash, target) and the same last_used per membership, provided the cap is not
#   reached (LRU eviction depends on arrival order by design) and either at most 4 targets
#   compete for a hash, or their times differ (a tie at the 4-slot boundary is broken by
#   arrival: "the first arrival keeps it");
# - removals are last-writer-wins, so they do not commute with records; what holds is that a
#   removal applied after anything leaves the target absent from those hashes;
# - the index never exceeds its cap under any sequence of operations.

HASHES = st.lists(st.integers(min_value=0, max_value=11), min_size=1, max_size=6)
MANY_KEYS = [f"http://h{n}:8000 m" for n in range(8)]
MANY_IDS = {key: n + 1 for n, key in enumerate(MANY_KEYS)}


def _apply(ops: list[PrefixOp], ids: dict[str, int], cap: int = 10_000) -> PrefixIndex:
    index = PrefixIndex(cap_entries=cap, clock=FakeClock())
    index.merge(ops, ids.get, lambda _target_id: 1)
    return index


def _state(index: PrefixIndex) -> set[tuple[int, int, float]]:
    return {
        (hash_, slot.target_id, slot.last_used_s) for hash_ in index for slot in index.slots(hash_)
    }


def _reordered(data: st.DataObject, ops: list[PrefixOp]) -> list[PrefixOp]:
    repeated = ops + data.draw(st.lists(st.sampled_from(ops), max_size=len(ops)))
    return data.draw(st.permutations(repeated))


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.builds(
            PrefixOp,
            target_key=st.sampled_from(MANY_KEYS[:4]),
            hashes=HASHES,
            last_used_s=st.sampled_from([1_789_999_000.0, 1_789_999_500.0, 1_789_999_900.0]),
        ),
        min_size=1,
        max_size=12,
    ),
    data=st.data(),
)
def test_records_of_up_to_4_targets_merge_in_any_order_and_repetition(
    ops: list[PrefixOp], data: st.DataObject
) -> None:
    assert _state(_apply(_reordered(data, ops), MANY_IDS)) == _state(_apply(ops, MANY_IDS))


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(MANY_KEYS), HASHES),
        min_size=1,
        max_size=16,
    ).map(
        lambda drawn: [
            PrefixOp(key, hashes, 1_789_999_000.0 + n) for n, (key, hashes) in enumerate(drawn)
        ]
    ),
    data=st.data(),
)
def test_records_with_distinct_times_merge_in_any_order_and_repetition(
    ops: list[PrefixOp], data: st.DataObject
) -> None:
    expected = _apply(ops, MANY_IDS)
    assert _state(_apply(_reordered(data, ops), MANY_IDS)) == _state(expected)
    assert all(len(expected.slots(hash_)) <= 4 for hash_ in expected)


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(
        st.builds(
            PrefixOp,
            target_key=st.sampled_from(MANY_KEYS),
            hashes=HASHES,
            last_used_s=st.floats(1_789_990_000.0, 1_790_000_000.0),
            remove=st.booleans(),
        ),
        max_size=20,
    ),
    removed_key=st.sampled_from(MANY_KEYS),
)
def test_a_removal_applied_last_leaves_the_target_absent(
    ops: list[PrefixOp], removed_key: str
) -> None:
    index = _apply(ops, MANY_IDS)
    index.merge(
        [PrefixOp(removed_key, list(range(12)), 0.0, remove=True)],
        MANY_IDS.get,
        lambda _target_id: 1,
    )
    assert all(target_id != MANY_IDS[removed_key] for _, target_id in _memberships(index))


_STEP = st.one_of(
    st.tuples(st.just("record"), st.integers(1, 6), HASHES),
    st.tuples(st.just("correct"), st.integers(1, 6), HASHES),
    st.tuples(st.just("merge"), st.integers(1, 8), HASHES),
    st.tuples(st.just("restore"), st.integers(1, 8), HASHES),
)


@settings(max_examples=150, deadline=None)
@given(cap=st.integers(1, 6), steps=st.lists(_STEP, max_size=40))
def test_the_index_never_exceeds_its_cap(cap: int, steps: list[tuple[str, int, list[int]]]) -> None:
    clock = FakeClock()
    index = PrefixIndex(cap_entries=cap, clock=clock)
    generation = {n: 1 for n in range(1, 9)}
    for kind, target_id, hashes in steps:
        clock.advance(1.0)
        chain_like = chain_for_chat(MODEL, None, [("user", str(h)) for h in hashes])
        if kind == "record":
            index.record(chain_like, target_id, 1, clock.now())
        elif kind == "correct":
            index.correct(chain_like, target_id)
        elif kind == "merge":
            op = PrefixOp(MANY_KEYS[target_id - 1], hashes, clock.time())
            index.merge([op], MANY_IDS.get, generation.get)
        else:
            slot = ExportedSlot(MANY_KEYS[target_id - 1], clock.time())
            index.restore([PrefixEntry(h, [slot]) for h in hashes], MANY_IDS.get, generation.get)
        assert len(index) <= cap
        assert all(1 <= len(index.slots(hash_)) <= 4 for hash_ in index)


def test_export_batches_are_the_export_and_survive_changes_between_batches() -> None:
    clock = FakeClock()
    index = PrefixIndex(cap_entries=1_000, clock=clock)  # one LRU (test_shards.py: several)
    for hash_ in range(7):
        index.merge([PrefixOp(A, [hash_], clock.time() - 100 + hash_)], KEYS.get, _generation())
    expected = index.export(KEY_OF.get)
    assert [entry.hash for entry in expected] == list(range(6, -1, -1))
    sizes = [len(batch) for batch in index.export_batches(KEY_OF.get, batch_entries=3)]
    assert sizes == [0, 0, 3, 3, 1]  # 0: the step that began the export, 0: the one that copied
    # the (only) shard

    batches = index.export_batches(KEY_OF.get, batch_entries=3)
    collected = list(next(batches))
    index.record(CHAIN, 2, 1, clock.now())  # the loop ran between two batches
    index.merge([PrefixOp(A, [0], clock.time(), remove=True)], KEYS.get, _generation())
    for batch in batches:
        collected.extend(batch)

    assert collected == expected
