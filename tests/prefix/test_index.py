"""The local prefix index (spec §6): lookup, record, slots, LRU cap, correction."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pharos.prefix import Chain, Match, PrefixIndex, Source, chain_for_chat

MODEL = "qwen2.5:0.5b"
TURNS = [
    ("system", "You are terse."),
    ("user", "What is a prefix cache?"),
    ("assistant", "Reused KV state for a shared prompt prefix."),
    ("user", "And why route by it?"),
]
FULL = chain_for_chat(MODEL, None, TURNS)


def _prefix(links: int) -> Chain:
    return chain_for_chat(MODEL, None, TURNS[:links])


def _generations(**by_target: int | None) -> Callable[[int], int | None]:
    table = {int(name[1:]): gen for name, gen in by_target.items()}
    return lambda target_id: table.get(target_id)


ALL_GEN_1 = _generations(t1=1, t2=1, t3=1, t4=1, t5=1, t6=1)


def _single(hash_: int) -> Chain:
    return Chain((hash_,), (100,))


def _targets_at(index: PrefixIndex, hash_: int) -> list[int]:
    return [slot.target_id for slot in index.slots(hash_)]


def test_lookup_returns_each_targets_longest_match() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 1, 10.0)
    index.record(_prefix(2), 2, 1, 11.0)
    index.record(_prefix(1), 1, 1, 12.0)  # a shorter record does not shorten target 1's match

    found = index.lookup(FULL, ALL_GEN_1)

    assert found == {
        1: Match(FULL.cum_bytes[3], Source.LOCAL),
        2: Match(FULL.cum_bytes[1], Source.LOCAL),
    }


def test_lookup_of_a_longer_request_matches_the_recorded_prefix() -> None:
    index = PrefixIndex()
    index.record(_prefix(3), 1, 1, 10.0)
    assert index.lookup(FULL, ALL_GEN_1) == {1: Match(FULL.cum_bytes[2], Source.LOCAL)}
    assert index.lookup(chain_for_chat(MODEL, b"[1]", TURNS), ALL_GEN_1) == {}


def test_stale_and_unknown_generations_are_skipped() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 1, 10.0)
    index.record(FULL, 2, 5, 10.0)

    assert set(index.lookup(FULL, _generations(t1=2, t2=5))) == {2}
    assert index.lookup(FULL, _generations(t1=1)) == {1: Match(FULL.cum_bytes[3], Source.LOCAL)}
    assert index.lookup(FULL, _generations()) == {}


def test_a_stale_long_match_falls_back_to_a_fresh_shorter_one() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 1, 10.0)
    index.record(_prefix(2), 1, 2, 20.0)  # reloaded (generation 2), then served 2 messages

    assert index.lookup(FULL, _generations(t1=2)) == {1: Match(FULL.cum_bytes[1], Source.LOCAL)}


def test_generation_is_compared_on_its_low_32_bits() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 2**32 + 3, 10.0)
    assert set(index.lookup(FULL, _generations(t1=2**32 + 3))) == {1}
    assert index.lookup(FULL, _generations(t1=2**32 + 4)) == {}


def test_lookup_reports_the_source_of_the_newest_record() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 1, 10.0, Source.PEER)
    assert index.lookup(FULL, ALL_GEN_1)[1].source is Source.PEER
    index.record(FULL, 1, 1, 11.0, Source.LOCAL)
    assert index.lookup(FULL, ALL_GEN_1)[1].source is Source.LOCAL
    index.record(FULL, 1, 1, 11.0, Source.RESTORED)  # same time: the first arrival keeps it
    assert index.lookup(FULL, ALL_GEN_1)[1].source is Source.LOCAL
    index.record(FULL, 1, 1, 5.0, Source.PEER)  # older: changes nothing
    assert index.lookup(FULL, ALL_GEN_1)[1].source is Source.LOCAL
    assert [slot.last_used_s for slot in index.slots(FULL.hashes[0])] == [11.0]


def test_a_fifth_target_replaces_the_least_recently_used_slot() -> None:
    index = PrefixIndex()
    chain = _single(7)
    for target_id, used_s in [(1, 4.0), (2, 1.0), (3, 3.0), (4, 2.0)]:
        index.record(chain, target_id, 1, used_s)

    index.record(chain, 5, 1, 5.0)

    assert _targets_at(index, 7) == [1, 3, 4, 5]


def test_a_refreshed_slot_survives_replacement() -> None:
    index = PrefixIndex()
    chain = _single(7)
    for target_id in (1, 2, 3, 4):
        index.record(chain, target_id, 1, float(target_id))
    index.record(chain, 1, 1, 10.0)

    index.record(chain, 5, 1, 11.0)

    assert sorted(_targets_at(index, 7)) == [1, 3, 4, 5]


def test_on_a_tie_in_last_used_the_first_arrival_keeps_its_slot() -> None:
    index = PrefixIndex()
    chain = _single(7)
    for target_id, used_s in [(1, 1.0), (2, 1.0), (3, 2.0), (4, 3.0)]:
        index.record(chain, target_id, 1, used_s)

    index.record(chain, 5, 1, 9.0)
    assert _targets_at(index, 7) == [1, 3, 4, 5]  # 2 arrived after 1 at the same time

    index.record(chain, 6, 1, 1.0)  # ties the oldest slot: the slot's holder keeps it
    assert _targets_at(index, 7) == [1, 3, 4, 5]


def test_a_record_older_than_every_slot_of_a_full_entry_is_dropped() -> None:
    index = PrefixIndex()
    chain = _single(7)
    for target_id in (1, 2, 3, 4):
        index.record(chain, target_id, 1, 10.0 + target_id)
    index.record(chain, 5, 1, 3.0)
    assert _targets_at(index, 7) == [1, 2, 3, 4]


def test_lru_eviction_at_cap_drops_the_least_recently_recorded_entry() -> None:
    index = PrefixIndex(cap_entries=3)
    for hash_ in (1, 2, 3):
        index.record(_single(hash_), 1, 1, float(hash_))
    index.record(_single(1), 2, 1, 4.0)  # refreshes entry 1
    index.lookup(_single(2), ALL_GEN_1)  # a lookup does not refresh

    index.record(_single(4), 1, 1, 5.0)

    assert len(index) == 3
    assert list(index) == [3, 1, 4]
    assert 2 not in index


def test_a_chain_longer_than_the_cap_keeps_its_latest_links() -> None:
    index = PrefixIndex(cap_entries=2)
    index.record(FULL, 1, 1, 1.0)
    assert list(index) == list(FULL.hashes[2:])
    assert index.lookup(FULL, ALL_GEN_1) == {1: Match(FULL.cum_bytes[3], Source.LOCAL)}


def test_correct_removes_the_target_from_every_link_and_only_that_target() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 1, 1.0)
    index.record(_prefix(2), 2, 1, 2.0)

    index.correct(FULL, 1)

    assert index.lookup(FULL, ALL_GEN_1) == {2: Match(FULL.cum_bytes[1], Source.LOCAL)}
    assert len(index) == 2  # links left with no slot are dropped
    index.correct(FULL, 2)
    assert len(index) == 0
    index.correct(FULL, 3)  # nothing recorded: a no-op


def test_record_refuses_a_target_id_beyond_32_bits() -> None:
    with pytest.raises(ValueError, match="target_id"):
        PrefixIndex().record(FULL, 2**32, 1, 1.0)


def test_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cap_entries"):
        PrefixIndex(cap_entries=0)


def test_an_older_record_under_a_new_generation_revives_the_slot_but_keeps_its_time() -> None:
    index = PrefixIndex()
    index.record(FULL, 1, 1, 10.0, Source.LOCAL)
    index.record(FULL, 1, 2, 5.0, Source.PEER)  # a delayed peer op, stamped with generation 2

    slot = index.slots(FULL.hashes[0])[0]
    assert (slot.generation, slot.last_used_s, slot.source) == (2, 10.0, Source.LOCAL)
    assert set(index.lookup(FULL, _generations(t1=2))) == {1}


@pytest.mark.parametrize(
    ("stop_after", "expected"),
    [
        (None, {1: 3, 2: 1}),  # every target's longest match
        (2, {1: 3, 2: 1}),  # both candidates matched: the same answer, read sooner
        (1, {1: 3}),  # one candidate: its longest match, the shorter links unread
    ],
)
def test_lookup_stops_once_every_candidate_has_its_longest_match(
    stop_after: int | None, expected: dict[int, int]
) -> None:
    index = PrefixIndex()
    index.record(Chain(FULL.hashes[:4], FULL.cum_bytes[:4]), 1, 1, 1.0)
    index.record(Chain(FULL.hashes[:2], FULL.cum_bytes[:2]), 2, 1, 2.0)
    found = index.lookup(FULL, ALL_GEN_1, stop_after)
    assert {t: m.matched_bytes for t, m in found.items()} == {
        t: FULL.cum_bytes[i] for t, i in expected.items()
    }
