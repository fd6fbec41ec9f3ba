"""A large prefix index is SHARDS LRUs by hash (prefix/index.py): exports walk the shards one
at a time and are never torn, whatever changes between two batches; a snapshot restored into
an index of the same size keeps every shard's order; the cap holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.prefix import PrefixEntry, PrefixIndex, PrefixOp
from pharos.prefix.index import SHARD_MIN_CAP, SHARDS

KEYS = {"http://a:11434 qwen": 1, "http://b:8080 qwen": 2, "http://c:8000 qwen": 3}
KEY_OF = {target_id: key for key, target_id in KEYS.items()}
A, B, C = KEYS


def generation(target_id: int) -> int | None:
    return 1 if target_id in KEY_OF else None


def filled(count: int, clock: FakeClock, cap: int = SHARD_MIN_CAP) -> PrefixIndex:
    index = PrefixIndex(cap_entries=cap, clock=clock)
    for hash_ in range(count):
        key = (A, B, C)[hash_ % 3]
        index.merge(
            [PrefixOp(key, [hash_ * 7919], clock.time() - 500 + hash_)], KEYS.get, generation
        )
    return index


def by_shard(entries: list[PrefixEntry]) -> dict[int, list[int]]:
    shards: dict[int, list[int]] = {}
    for entry in entries:
        shards.setdefault(entry.hash % SHARDS, []).append(entry.hash)
    return shards


def test_a_sharded_export_is_most_recent_first_within_every_shard() -> None:
    clock = FakeClock()
    index = filled(200, clock)
    for shard, hashes in by_shard(index.export(KEY_OF.get)).items():
        times = [index.slots(h)[0].last_used_s for h in hashes]
        assert times == sorted(times, reverse=True), f"shard {shard}"
    assert len(by_shard(index.export(KEY_OF.get))) == SHARDS


def test_a_snapshot_restored_into_an_index_of_the_same_size_exports_the_same() -> None:
    clock = FakeClock()
    sender = filled(300, clock)
    snapshot = sender.export(KEY_OF.get)
    receiver = PrefixIndex(cap_entries=SHARD_MIN_CAP, clock=clock)
    receiver.restore(snapshot, KEYS.get, generation)
    assert receiver.export(KEY_OF.get) == snapshot


def test_the_cap_holds_per_shard_and_keeps_each_shards_most_recent() -> None:
    clock = FakeClock()
    cap = SHARD_MIN_CAP
    index = filled(cap + 4_000, clock, cap=cap)
    assert len(index) <= cap
    assert 0 not in index and (cap + 3_999) * 7919 in index


# One step between two batches of an export: (what, target, hashes).
STEP = st.tuples(
    st.sampled_from(["record", "remove", "new"]),
    st.sampled_from([A, B, C]),
    st.lists(st.integers(0, 120), min_size=1, max_size=8),
)


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 40),
    steps=st.lists(st.lists(STEP, max_size=4), max_size=30),
)
def test_an_export_is_the_index_at_its_first_batch_whatever_changes_between_batches(
    batch: int, steps: list[list[tuple[str, str, list[int]]]]
) -> None:
    """Copy before write: a shard changed before the export reached it was copied first.
    The index itself ends exactly as the same changes leave an index nobody exported."""
    clock = FakeClock()
    index, twin = filled(120, clock), filled(120, clock)
    expected = index.export(KEY_OF.get)
    collected: list[PrefixEntry] = []
    batches = index.export_batches(KEY_OF.get, batch_entries=batch)
    pending = iter(steps)
    for got in batches:
        collected.extend(got)
        for what, key, hashes in next(pending, []):
            clock.advance(1.0)
            scaled = [h * 7919 if what != "new" else h * 7919 + 1 for h in hashes]
            op = PrefixOp(key, scaled, clock.time(), remove=what == "remove")
            index.merge([op], KEYS.get, generation)
            twin.merge([op], KEYS.get, generation)
    assert collected == expected
    assert index.export(KEY_OF.get) == twin.export(KEY_OF.get)


def test_an_abandoned_export_stops_copying_on_writes() -> None:
    clock = FakeClock()
    index = filled(100, clock)
    batches = index.export_batches(KEY_OF.get, batch_entries=5)
    next(batches)
    batches.close()  # the peer hung up mid-snapshot
    assert index._exports == []
