"""The book's own counting (record_reply, admit) adds the counts as they are to the Day sums;
a book that merged the same cells from a peer, which takes differences of cells, must show
the same rows and the same quota figures."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.usage import UsageBook

WALL = 1_790_000_040.0
COUNT = st.one_of(st.none(), st.integers(min_value=0, max_value=10_000))
REPLY = st.tuples(
    st.sampled_from(["alice", "bob"]), st.sampled_from(["m1", "m2"]), COUNT, COUNT, COUNT
)


@settings(max_examples=60, deadline=None)
@given(replies=st.lists(REPLY, max_size=30), admits=st.integers(min_value=0, max_value=5))
def test_counted_sums_match_a_book_that_merged_the_same_cells(
    replies: list[tuple[str, str, int | None, int | None, int | None]], admits: int
) -> None:
    counted = UsageBook(FakeClock(start_wall=WALL), ZoneInfo("UTC"), origin=7)
    for key, model, prompt, cached, completion in replies:
        counted.record_reply(key, model, prompt, cached, completion)
    for _ in range(admits):
        assert counted.admit("alice", 100).ok
    merged = UsageBook(FakeClock(start_wall=WALL), ZoneInfo("UTC"), origin=8)
    merged.merge(counted.export_snapshot())
    assert counted.today_by_key() == merged.today_by_key()
    for key in ("alice", "bob"):
        assert counted.tokens_today(key) == merged.tokens_today(key)
        known = sum(
            (p or 0) + (c or 0) for k, _, p, _, c in replies if k == key
        )  # an unknown count adds nothing, never a guess
        assert counted.tokens_today(key) == known
    unmetered = sum(1 for _, _, p, _, c in replies if p is None or c is None)
    assert sum(row.unmetered for row in counted.today_by_key()) == unmetered
