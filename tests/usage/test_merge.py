"""Merges are commutative and idempotent: any order, any repetition, the same totals."""

from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.usage import DAY, MINUTE, Cell, UsageBook

UTC = ZoneInfo("UTC")
WALL = 1_790_000_040.0
TODAY = int(WALL // 86400)
MINUTE_NOW = int(WALL // 60)

counts = st.integers(min_value=0, max_value=10_000)
day_cells = st.builds(
    Cell,
    origin=st.sampled_from([1, 2, 3]),
    kind=st.just(DAY),
    bucket=st.sampled_from([TODAY - 1, TODAY]),
    key=st.sampled_from(["alice", "bob"]),
    model=st.sampled_from(["m1", "m2"]),
    requests=counts,
    prompt_tokens=counts,
    cached_tokens=counts,
    completion_tokens=counts,
    unmetered=counts,
)
minute_cells = st.builds(
    Cell,
    origin=st.sampled_from([1, 2, 3]),
    kind=st.just(MINUTE),
    bucket=st.sampled_from([MINUTE_NOW - 1, MINUTE_NOW]),
    key=st.sampled_from(["alice", "bob"]),
    requests=counts,
)
any_cells = st.lists(st.one_of(day_cells, minute_cells), max_size=30)


def fresh_book(clock: FakeClock) -> UsageBook:
    return UsageBook(clock, UTC, origin=1_000)


def state(book: UsageBook) -> tuple[object, ...]:
    return (
        sorted(book.export_snapshot(), key=lambda cell: cell.id),
        book.today_by_key(),
        book.tokens_today("alice"),
        book.tokens_today("bob"),
        book.admit("alice", 10**9),  # reads the minute window (and counts one on every book)
    )


@given(cells=any_cells, data=st.data())
@settings(max_examples=150, deadline=None)
def test_merge_order_and_repetition_do_not_matter(cells: list[Cell], data: st.DataObject) -> None:
    clock = FakeClock(start_wall=WALL)
    in_order = fresh_book(clock)
    in_order.merge(cells)
    shuffled = data.draw(st.permutations(cells))
    repeats = data.draw(st.lists(st.sampled_from(cells), max_size=20)) if cells else []
    other = fresh_book(clock)
    for cell in [*shuffled, *repeats]:
        other.merge([cell])
    assert state(in_order) == state(other)


@given(
    replies=st.lists(
        st.tuples(
            st.sampled_from([0, 1, 2]),  # which instance served it
            st.sampled_from(["alice", "bob"]),
            st.sampled_from(["m1", "m2"]),
            st.one_of(st.none(), counts),
            st.one_of(st.none(), counts),
        ),
        max_size=25,
    ),
    data=st.data(),
)
@settings(max_examples=100, deadline=None)
def test_deltas_in_any_order_sum_to_every_instances_own_counts(
    replies: list[tuple[int, str, str, int | None, int | None]], data: st.DataObject
) -> None:
    """Deltas carry absolute values: late, lost-then-resent or repeated ones still add up."""
    clock = FakeClock(start_wall=WALL)
    instances = [UsageBook(clock, UTC, origin=origin) for origin in (11, 12, 13)]
    deltas: list[list[Cell]] = []
    for served_by, key, model, prompt, completion in replies:
        instances[served_by].record_reply(key, model, prompt, None, completion)
        deltas.append(instances[served_by].export_delta())
    deliveries = data.draw(st.permutations(deltas))  # every delta arrives at least once
    if deltas:
        deliveries += data.draw(st.lists(st.sampled_from(deltas), max_size=10))
    receiver = UsageBook(clock, UTC, origin=99)
    for delta in deliveries:
        receiver.merge(delta)

    expected: dict[str, list[int]] = {}
    for instance in instances:
        for row in instance.today_by_key():
            assert row.key is not None
            acc = expected.setdefault(row.key, [0, 0, 0, 0])
            acc[0] += row.requests
            acc[1] += row.prompt_tokens
            acc[2] += row.completion_tokens
            acc[3] += row.unmetered
    got = {
        row.key: [row.requests, row.prompt_tokens, row.completion_tokens, row.unmetered]
        for row in receiver.today_by_key()
    }
    assert got == expected
    for key, acc in expected.items():
        assert receiver.tokens_today(key) == acc[1] + acc[2]
