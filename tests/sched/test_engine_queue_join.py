"""A full engine whose every slot is held by traffic Pharos doesn't see gets our request in its
own queue (issue 15, noisy). The router sees that client's freed slot only at the next scrape,
and a client that sends again 0.5-2 s after its reply has taken it by then; the engine hands
the slot to the first request in its queue.
"""

from __future__ import annotations

import asyncio

from pharos.clock import FakeClock
from pharos.sched import RouteRequest, Scheduler
from pharos.sched.gauges import Gauges
from tests.sched.fakes import FakeTargets, make_view, ok


def req() -> RouteRequest:
    return RouteRequest(model="m", prompt_tokens=1000, chain=None, seed=0)


async def test_a_request_joins_the_engines_queue_when_every_slot_is_held_by_traffic_we_dont_see(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=2, running=2, waiting=0, last_fast_scrape_at=clock.now()))
    lease = await asyncio.wait_for(sched.acquire("k", 1, req()), timeout=1)
    assert lease.target.target_id == 1
    assert lease.queue_outcome == "engine_queue"  # counted apart from our own queue's waits
    assert lease.decision.reason.endswith("no free slot: sent into the engine's own queue")
    assert sched.waiting_count() == 0
    assert sched.inflight(1) == 1


async def test_a_second_request_joins_behind_the_first_while_no_lease_of_ours_holds_a_slot(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=2, running=2, waiting=0, last_fast_scrape_at=clock.now()))
    first = await asyncio.wait_for(sched.acquire("k", 1, req()), timeout=1)
    second = await asyncio.wait_for(sched.acquire("j", 1, req()), timeout=1)
    assert (first.target.target_id, second.target.target_id) == (1, 1)
    first.release(ok())
    second.release(ok())
    assert sched.inflight(1) == 0


async def test_at_most_a_slots_worth_joins_between_two_scrapes(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    """The router's queue is fair across keys and bounded in time; it never empties into an
    engine's FIFO on one scrape's word. Ours sent since the scrape count as its Waiting."""
    targets.add(make_view(1, capacity=2, running=2, waiting=0, last_fast_scrape_at=clock.now()))
    tasks = [asyncio.ensure_future(sched.acquire(f"k{i}", 1, req())) for i in range(5)]
    await asyncio.sleep(0)
    assert [t.done() for t in tasks] == [True, True, False, False, False]
    assert sched.waiting_count() == 3
    clock.advance(1.0)
    # the next scrape: both of ours queued in the engine, the slots still the other client's
    targets.update(1, running=2, waiting=2, last_fast_scrape_at=clock.now())
    clock.advance(0.1)
    late = asyncio.ensure_future(sched.acquire("late", 1, req()))
    await asyncio.sleep(0)
    assert not late.done()
    for task in [*tasks, late]:
        task.cancel()


# running, waiting at a fresh scrape | our leases there that took a free slot | joins
CASES = [
    (2, 0, 0, True),  # both slots the bypassing client's
    (2, 1, 0, True),  # and one of its requests queued in the engine
    (2, 2, 0, False),  # a slot's worth queued in the engine already: the router's queue
    (2, 0, 1, False),  # one slot ours: its release frees a slot we see at once
    (1, 0, 0, None),  # a slot free: an ordinary immediate lease
    (None, None, 2, False),  # no Running reported, our two leases fill it: the router's queue
]


async def test_which_full_engines_a_request_joins(
    new_sched: object, targets: FakeTargets, clock: FakeClock
) -> None:
    for running, waiting, ours, joins in CASES:
        sched = new_sched()  # type: ignore[operator]
        view = targets.add(
            make_view(1, capacity=2, running=None, waiting=None, last_fast_scrape_at=None)
        )
        held = []
        for _ in range(ours):
            held.append(await sched.acquire("mine", 1, req()))
        targets.update(
            view.target_id,
            running=running,
            waiting=waiting,
            last_fast_scrape_at=clock.now() + 0.1,
        )
        clock.advance(0.2)
        task = asyncio.ensure_future(sched.acquire("k", 1, req()))
        await asyncio.sleep(0)
        case = (running, waiting, ours)
        if joins is None:
            assert task.done(), case
        else:
            assert task.done() is joins, case
        task.cancel()
        for lease in held:
            lease.release(ok())
        await asyncio.sleep(0)


async def test_a_scrape_older_than_our_last_reply_there_never_joins(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=2, running=0, waiting=0, last_fast_scrape_at=clock.now()))
    first = await sched.acquire("k", 1, req())
    clock.advance(0.5)
    # the scrape saw `first` and a bypassing request running, and one more of its queued
    targets.update(1, running=2, waiting=1, last_fast_scrape_at=clock.now())
    clock.advance(0.2)
    first.release(ok())  # the freed slot went to the engine's waiter: full, as of a stale scrape
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    task.cancel()


async def test_a_slot_a_peer_may_hold_keeps_the_router_queue(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    view = targets.add(
        make_view(1, capacity=2, running=2, waiting=0, last_fast_scrape_at=clock.now())
    )
    sched.merge(7, Gauges(inflight={view.key: 1}, seq=1))  # its release reaches us within 200 ms
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    task.cancel()


async def test_a_waiter_joins_once_a_scrape_shows_the_slots_held_by_others(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=1, running=0, waiting=0, last_fast_scrape_at=clock.now()))
    first = await sched.acquire("k", 1, req())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()  # our own lease holds the slot: the router's queue
    first.release(ok())
    second = await asyncio.wait_for(task, timeout=1)  # that release freed the slot at once
    assert second.queue_outcome == "waited"
    assert "engine's own queue" not in second.decision.reason
    clock.advance(1.0)
    targets.update(1, running=1, waiting=0, last_fast_scrape_at=clock.now())
    second.release(ok())
    clock.advance(0.5)
    # the next scrape: the slot is the bypassing client's now
    targets.update(1, running=1, waiting=0, last_fast_scrape_at=clock.now())
    third = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert third.done()
    assert third.result().target.target_id == 1
    assert third.result().queue_outcome == "engine_queue"
