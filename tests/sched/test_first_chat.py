"""A person's first chat goes where fewer people are (issue 15, sticky's map drawn per seed).

Where a person's first chat goes, their later chats go home to. It went where a slot was free
the moment they arrived, so an early imbalance held for the run; a sticky map splitting the
people evenly beat cost's p50 and p95. Now a first chat is charged PolicyConfig.person_s per
person on each target, per slot: the keys whose latest conversation ended there, first chats
in flight, and the requests the engine reports beyond ours.
"""

from __future__ import annotations

import pytest

from pharos.clock import FakeClock
from pharos.policy import DEFAULT_CONFIG
from pharos.sched import Lease, RouteRequest, Scheduler
from pharos.sched.candidates import unseen_requests
from pharos.sched.held_affinity import AFFINITY_WINDOW_S, KeyHomes, UnseenPeaks
from tests.sched.fakes import FakeTargets, make_view, ok
from tests.sched.test_held_affinity import chain_of, fresh, sched_with


def test_a_key_is_a_newcomer_until_a_request_of_its_goes_out() -> None:
    homes = KeyHomes()
    assert homes.newcomer("ann") is True
    homes.started("ann")
    assert homes.newcomer("ann") is False  # in flight
    homes.left("ann")
    homes.ended("ann", chain_of(1, 2), 7, 0.0)
    assert homes.newcomer("ann") is False  # a chat of hers ended here


# per target (running, waiting, ours, live peers'), when our last reply there ended (the
# scrape was at 10 s): the requests its engine reports beyond them
UNSEEN_CASES = [
    ((None, None, 0, 0), None, None),  # the engine reports no Running: unknown, left out
    ((1, None, 0, 0), None, 1),  # Waiting unknown counts as none
    ((2, 1, 1, 0), 9.0, 2),
    ((2, 0, 1, 1), None, None),  # all ours and a peer's
    ((1, 0, 2, 0), None, None),  # ours not yet in the engine's counts: never negative
    ((2, 0, 0, 0), 11.0, None),  # stale: the scrape still counts our reply that ended since
]


@pytest.mark.parametrize(("counts", "reply_ended_at", "unseen"), UNSEEN_CASES)
def test_requests_the_engine_reports_beyond_ours_and_our_peers_are_unseen(
    counts: tuple[int | None, int | None, int, int],
    reply_ended_at: float | None,
    unseen: int | None,
) -> None:
    running, waiting, ours, peers = counts
    view = make_view(7, running=running, waiting=waiting, last_fast_scrape_at=10.0)
    ended = {} if reply_ended_at is None else {7: reply_ended_at}
    found = unseen_requests([view], {7: ours}, {view.key: peers}, ended)
    assert found.get(7) == unseen


async def _chat_on(sched: Scheduler, clock: FakeClock, key: str, n: int, target_id: int) -> None:
    only = frozenset({3 - target_id})
    lease = await sched.acquire(key, 1, RouteRequest("m", 600, fresh(n), n, only))
    clock.advance(2.0)
    lease.release(ok(prompt_tokens=600, cached_tokens=0))


# person_s: where dan's first chat goes when ann and ben are homed on target 1 and cat's first
# chat holds one of target 2's two slots
PERSON_CASES = [
    (DEFAULT_CONFIG.person_s, 2),  # 2 people on 1 against 1 on 2: 0.3 s against 0.15 s
    (0.0, 1),  # off: the least utilized target of the moment
]


@pytest.mark.parametrize(("person_s", "chosen"), PERSON_CASES)
async def test_a_persons_first_chat_goes_where_fewer_people_are(
    targets: FakeTargets, clock: FakeClock, person_s: float, chosen: int
) -> None:
    targets.add(make_view(1))
    targets.add(make_view(2))
    sched = sched_with(targets, clock, person_s=person_s)
    await _chat_on(sched, clock, "ann", 1, 1)
    await _chat_on(sched, clock, "ben", 2, 1)
    cat: Lease = await sched.acquire("cat", 1, RouteRequest("m", 600, fresh(3), 3, frozenset({1})))
    dan = await sched.acquire("dan", 1, RouteRequest("m", 600, fresh(4), 4))
    assert dan.target.target_id == chosen
    cat.release(ok())
    dan.release(ok())


async def test_requests_pharos_doesnt_see_count_as_people(
    targets: FakeTargets, clock: FakeClock
) -> None:
    """Target 1's engine runs two requests that aren't ours, of 4 slots; ann is homed on 2."""
    targets.add(make_view(1, capacity=4, running=2, waiting=0))
    targets.add(make_view(2, capacity=4))
    sched = sched_with(targets, clock)
    await _chat_on(sched, clock, "ann", 1, 2)
    ben = await sched.acquire("ben", 1, RouteRequest("m", 600, fresh(2), 2))
    assert ben.target.target_id == 2  # 2 people on 1 against 1 on 2
    ben.release(ok())


# the engine-reported requests beyond ours seen on target 7, as (seconds, count), then when
# asked: the people they count as (None: none)
PEAK_CASES = [
    ([], 0.0, None),  # never seen
    ([(0.0, 1)], 0.0, 1),
    ([(0.0, 1)], AFFINITY_WINDOW_S, 1),  # still within the window
    ([(0.0, 1)], AFFINITY_WINDOW_S + 1, None),  # aged out, as a person's latest chat does
    ([(0.0, 2), (10.0, 1)], 20.0, 2),  # the peak within the window, not the latest count
    ([(0.0, 2), (10.0, 1)], AFFINITY_WINDOW_S + 5, None),  # the peak aged out; 1 was not kept
    ([(0.0, 2), (AFFINITY_WINDOW_S + 5, 1)], AFFINITY_WINDOW_S + 6, 1),  # a new count after it
    ([(0.0, 1), (100.0, 1)], AFFINITY_WINDOW_S + 50, 1),  # seen again: the window restarts
]


@pytest.mark.parametrize(("seen", "asked_at", "people"), PEAK_CASES)
def test_unseen_traffic_counts_by_its_peak_over_the_window(
    seen: list[tuple[float, int]], asked_at: float, people: int | None
) -> None:
    peaks = UnseenPeaks(AFFINITY_WINDOW_S)
    for at, count in seen:
        peaks.observe({7: count}, at)
    assert peaks.people(asked_at).get(7) == people


async def test_unseen_traffic_between_its_requests_still_counts_as_people(
    targets: FakeTargets, clock: FakeClock
) -> None:
    """A client Pharos doesn't see ran two requests on target 1 when ann arrived, and none
    when ben did, 4 s later (between its requests): the engine's counts at that moment say
    target 1 is empty. ben's first chat still goes where fewer people are, ann's target 2."""
    targets.add(make_view(1, running=2, waiting=0, last_fast_scrape_at=0.0))
    targets.add(make_view(2))
    sched = sched_with(targets, clock)
    ann = await sched.acquire("ann", 1, RouteRequest("m", 600, fresh(1), 1))
    assert ann.target.target_id == 2  # target 1 full
    clock.advance(2.0)
    ann.release(ok(prompt_tokens=600, cached_tokens=0))
    clock.advance(2.0)
    targets.update(1, running=0, last_fast_scrape_at=clock.now())
    ben = await sched.acquire("ben", 1, RouteRequest("m", 600, fresh(2), 2))
    assert ben.target.target_id == 2  # 2 people on 1 (its peak) against ann on 2
    ben.release(ok())
