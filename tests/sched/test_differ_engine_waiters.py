"""A slot our reply freed between two scrapes, on an engine that reported waiters (issue 15).

A client that bypasses Pharos shows only as engine Running and Waiting. When one of our replies
ended after the scrape, the local count used to win outright, so the freed slot was granted at
once, though the engine's deferred request had taken it: our next request queued inside a full
engine (noisy, seed 1: a turn waited 5.0 s in the router, then 3.8 s more inside e0).
"""

from __future__ import annotations

import asyncio

from pharos.clock import FakeClock
from pharos.policy import Candidate
from pharos.sched import RouteRequest, Scheduler
from pharos.sched.candidates import build_candidates
from pharos.sched.fits import FitsIfCold, backend_occupancy
from pharos.state.view import TargetView
from tests.sched.fakes import FakeTargets, make_view, ok

SCRAPED_AT = 10.0


def candidate_of(
    view: TargetView, *, local: int, reply_ended_at: float | None, router_waiting: int = 0
) -> Candidate:
    last_reply_end = {} if reply_ended_at is None else {view.target_id: reply_ended_at}
    local_inflight = {view.target_id: local} if local else {}
    fits_of = FitsIfCold(
        lambda _url, _now: [view],
        SCRAPED_AT,
        local_inflight=local_inflight,
        peer_inflight={},
        last_reply_end=last_reply_end,
    )
    candidates, _ = build_candidates(
        [view],
        local_inflight=local_inflight,
        peer_inflight={},
        last_reply_end=last_reply_end,
        router_waiting=router_waiting,
        matches={},
        default_capacity=2,
        fits_of=fits_of,
    )
    return candidates[0]


def test_a_slot_our_reply_freed_stays_taken_while_the_engine_reported_waiters() -> None:
    # running, waiting at the scrape | ours now | a reply of ours ended | free | queue ahead
    cases = [
        (2, 1, 0, SCRAPED_AT + 0.5, 0, 0 + 3),  # the engine's waiter took the freed slot
        (2, 2, 0, SCRAPED_AT + 0.5, 0, 1 + 3),  # one of its two waiters did
        (2, 0, 0, SCRAPED_AT + 0.5, 2, 3),  # no waiter: the local count wins, as before
        (2, 0, 1, SCRAPED_AT + 0.5, 1, 3),
        (2, 1, 0, SCRAPED_AT - 0.5, 0, 1 + 3),  # the scrape came after the reply: fresh
        (2, 1, 0, None, 0, 1 + 3),  # no reply ever ended: fresh
    ]
    for running, waiting, ours, ended_at, free, queue_ahead in cases:
        view = make_view(
            1, capacity=2, running=running, waiting=waiting, last_fast_scrape_at=SCRAPED_AT
        )
        got = candidate_of(view, local=ours, reply_ended_at=ended_at, router_waiting=3)
        assert (got.free_slots, got.queue_ahead) == (free, queue_ahead), (
            running,
            waiting,
            ours,
            ended_at,
        )


def test_without_engine_counts_or_a_scrape_the_local_count_is_all_there_is() -> None:
    # running | waiting | last fast scrape at | free with 1 of ours after a reply ended
    cases = [
        (None, None, SCRAPED_AT, 1),
        (2, 1, None, 1),  # never scraped: nothing to say who holds the slot
    ]
    for running, waiting, scraped_at, free in cases:
        view = make_view(
            1, capacity=2, running=running, waiting=waiting, last_fast_scrape_at=scraped_at
        )
        got = candidate_of(view, local=1, reply_ended_at=SCRAPED_AT + 0.5)
        assert got.free_slots == free, (running, waiting, scraped_at)


def test_a_model_whose_engine_has_waiters_stays_busy_for_the_memory_fit() -> None:
    view = make_view(1, capacity=2, running=2, waiting=1, last_fast_scrape_at=SCRAPED_AT)
    # last reply ended at | occupancy with none of ours left
    cases = [(SCRAPED_AT + 0.5, 2), (SCRAPED_AT - 0.5, 2), (None, 2)]
    for ended_at, occupancy in cases:
        last_reply_end = {} if ended_at is None else {1: ended_at}
        got = backend_occupancy(
            [view], local_inflight={}, peer_inflight={}, last_reply_end=last_reply_end
        )
        assert got == [(view, occupancy)], ended_at
    idle = make_view(1, capacity=2, running=2, waiting=0, last_fast_scrape_at=SCRAPED_AT)
    got = backend_occupancy(
        [idle], local_inflight={}, peer_inflight={}, last_reply_end={1: SCRAPED_AT + 0.5}
    )
    assert got == [(idle, 0)]  # no waiter: the reply's slot is free


async def test_a_waiter_is_not_sent_into_an_engine_whose_own_waiter_took_the_freed_slot(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=2, running=0, waiting=0, last_fast_scrape_at=clock.now()))
    ours = await sched.acquire("k", 1, RouteRequest("m", 100, None, 0))
    clock.advance(1.0)
    # the scrape: ours and a bypassing client's request run, another of its requests waits
    targets.update(1, running=2, waiting=1, last_fast_scrape_at=clock.now())
    waiter = asyncio.ensure_future(sched.acquire("k", 1, RouteRequest("m", 100, None, 1)))
    await asyncio.sleep(0)
    assert not waiter.done()
    clock.advance(0.3)
    ours.release(ok())
    await asyncio.sleep(0)
    assert not waiter.done()  # the engine's waiter has the slot ours freed
    clock.advance(0.7)
    targets.update(1, running=1, waiting=0, last_fast_scrape_at=clock.now())
    sched.kick()
    await asyncio.sleep(0)
    assert waiter.done()
    assert waiter.result().target.target_id == 1
