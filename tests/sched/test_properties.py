"""Property tests: no lease lost or double-released; peer gauge merges are order independent."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.prefix import PrefixIndex
from pharos.sched import Gauges, Lease, RouteRequest, Scheduler
from tests.sched.fakes import FakeTargets, make_view, ok

ops_st = st.lists(
    st.one_of(
        st.tuples(
            st.just("acquire"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["m", "n"])
        ),
        st.tuples(st.just("release"), st.integers(0, 50), st.booleans()),
        st.tuples(st.just("cancel"), st.integers(0, 50), st.just("")),
        st.tuples(st.just("kick"), st.just(0), st.just("")),
        st.tuples(st.just("peer"), st.integers(0, 2), st.sampled_from(["m", "n"])),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(ops=ops_st)
def test_no_lease_is_lost_or_double_released(ops: list[tuple[str, int | str, object]]):
    async def scenario() -> None:
        clock = FakeClock()
        targets = FakeTargets()
        views = [
            targets.add(make_view(1, model="m", capacity=1)),
            targets.add(make_view(2, model="m", capacity=2)),
            targets.add(make_view(3, model="n", capacity=1)),
        ]
        sched = Scheduler(targets, PrefixIndex(clock=clock), clock, queue_limit=10)
        pending: list[asyncio.Task[Lease]] = []
        held: list[Lease] = []
        released: list[Lease] = []
        seq = 0

        def collect() -> None:
            for task in [t for t in pending if t.done()]:
                pending.remove(task)
                if not task.cancelled() and task.exception() is None:
                    held.append(task.result())

        def check() -> None:
            for view in views:
                mine = sum(1 for lease in held if lease.target.target_id == view.target_id)
                assert sched.inflight(view.target_id) == mine
                assert mine <= (view.capacity or 0)
            assert sched.waiting_count() == len(pending)
            assert all(not lease.released for lease in held)

        for op, arg, extra in ops:
            if op == "acquire":
                request = RouteRequest(str(extra), 100, None, seq)
                seq += 1
                pending.append(asyncio.ensure_future(sched.acquire(str(arg), 1, request)))
            elif op == "release" and (held or released):
                pool = held if held else released
                lease = pool[int(arg) % len(pool)]
                lease.release(ok())
                if extra:
                    lease.release(ok())  # a second release is a no-op
                if lease in held:
                    held.remove(lease)
                    released.append(lease)
            elif op == "cancel" and pending:
                pending[int(arg) % len(pending)].cancel()
            elif op == "kick":
                sched.kick()
            elif op == "peer":
                # a peer's slot on target 1 comes and goes; its waiters don't change ours
                busy = {views[0].key: 1} if int(arg) == 1 else {}
                sched.merge(5, Gauges(inflight=busy, waiting={str(extra): 1}, seq=seq))
                seq += 1
            for _ in range(3):
                await asyncio.sleep(0)
            collect()
            check()
        for lease in held:
            lease.release(ok())
        for task in pending:
            task.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        collect()
        for lease in held:
            lease.release(ok())
        assert sched.waiting_count() == 0
        assert all(sched.inflight(v.target_id) == 0 for v in views)

    asyncio.run(scenario())


gauges_st = st.builds(
    Gauges,
    inflight=st.dictionaries(st.sampled_from(["t1", "t2", "t3"]), st.integers(0, 5), max_size=3),
    waiting=st.dictionaries(st.sampled_from(["m", "n"]), st.integers(0, 5), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(
    reports=st.dictionaries(
        st.tuples(st.integers(1, 4), st.integers(0, 5)), gauges_st, min_size=1, max_size=10
    ),
    data=st.data(),
)
def test_merge_is_order_and_repetition_independent(
    reports: dict[tuple[int, int], Gauges], data: st.DataObject
):
    """Reports keyed (origin, seq): applying them in any order, any number of times, gives the
    same totals as applying each origin's newest report once."""
    stamped = [(origin, Gauges(g.inflight, g.waiting, seq)) for (origin, seq), g in reports.items()]
    shuffled = data.draw(st.permutations(stamped))
    repeats = data.draw(st.lists(st.sampled_from(stamped), max_size=10))

    def totals(sequence: list[tuple[int, Gauges]]) -> Gauges:
        targets = FakeTargets()
        sched = Scheduler(targets, PrefixIndex(), FakeClock())
        for origin, gauges in sequence:
            sched.merge(origin, gauges)
        return sched.peer_totals()

    newest: dict[int, Gauges] = {}
    for origin, gauges in stamped:
        if origin not in newest or newest[origin].seq < gauges.seq:
            newest[origin] = gauges
    expected = totals(list(newest.items()))
    assert totals([*shuffled, *repeats]) == expected
    assert totals([*repeats, *shuffled, *shuffled]) == expected


def test_a_silent_origin_stops_counting_after_two_seconds():
    clock = FakeClock()
    sched = Scheduler(FakeTargets(), PrefixIndex(), clock)
    sched.merge(1, Gauges({"t": 2}, {"m": 1}, seq=1))
    clock.advance(2.0)
    assert sched.peer_totals().inflight == {"t": 2}
    clock.advance(0.01)
    assert sched.peer_totals().inflight == {}
    sched.merge(1, Gauges({"t": 1}, {}, seq=0))  # a restarted origin starts its seq over
    assert sched.peer_totals().inflight == {"t": 1}


def test_negative_peer_counts_are_ignored():
    sched = Scheduler(FakeTargets(), PrefixIndex(), FakeClock())
    sched.merge(1, Gauges({"t": -3}, {"m": -1}, seq=1))
    sched.merge(2, Gauges({"t": 2}, {"m": 1}, seq=1))
    assert sched.peer_totals() == Gauges({"t": 2}, {"m": 1})
