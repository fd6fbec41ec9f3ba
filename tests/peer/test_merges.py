"""Every merge a snapshot drives (spec §12, §14 layer 1): applying snapshots in any order,
any number of times, gives the same state. Gauges, cells and prefix ops have their own
property tests in tests/sched, tests/usage and tests/prefix."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.state import StatRecord
from pharos.state.registry import TargetRegistry
from tests.peer.snapshots import merged_state, snapshots_st

estimates = st.one_of(
    st.none(),
    st.floats(min_value=0.0, max_value=100.0, allow_nan=False),
    st.sampled_from([float("nan"), float("inf"), -1.0]),  # invalid: ignored
)
records = st.builds(
    StatRecord,
    key=st.sampled_from(["http://a:1 m", "http://b:1 m", "http://a:1 n"]),
    prefill_s_per_token=estimates,
    load_s=estimates,
    service_s=estimates,
)


def restored(batches: Sequence[Sequence[StatRecord]]) -> list[StatRecord]:
    registry = TargetRegistry()
    for batch in batches:
        registry.restore(batch)
    return sorted(registry.export(), key=lambda r: r.key)


@given(batches=st.lists(st.lists(records, max_size=4), max_size=4), data=st.data())
def test_stats_restore_in_any_order_and_repetition_gives_the_same_estimates(
    batches: list[list[StatRecord]], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(batches))
    repeated = (
        [*shuffled, *data.draw(st.lists(st.sampled_from(batches), max_size=3))] if batches else []
    )
    assert restored(repeated) == restored(batches)


@settings(max_examples=40, deadline=None)
@given(snapshots=snapshots_st, data=st.data())
async def test_snapshots_merged_in_any_order_and_repetition_give_the_same_state(
    snapshots: list[bytes], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(snapshots))
    extra = data.draw(st.lists(st.sampled_from(snapshots), max_size=2)) if snapshots else []
    assert await merged_state([*order, *extra]) == await merged_state(snapshots)
