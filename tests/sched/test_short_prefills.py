"""Our leases' expected prefill ends bound a full target's wait (issue 15, sched/prefills.py).

A classifier call (1,000 tokens, 900 cached on target 1) beside two cold 14k-token agent
prompts holding both of target 1's slots: main queued it there for ~30 s (agents seed 3) while
target 2 had a free slot.
"""

from __future__ import annotations

import asyncio

import pytest

from pharos.clock import FakeClock
from pharos.prefix import Chain, PrefixIndex, chain_for_chat, chain_for_prompt
from pharos.sched import Lease, RouteRequest, Scheduler
from pharos.sched.candidates import build_candidates
from pharos.sched.prefills import NO_BOUND, PrefillsInFlight, prefill_estimate_s
from tests.sched.fakes import FakeTargets, make_view, ok

CLASSIFY = chain_for_prompt("m", "classify " * 400)
TITLE = chain_for_chat("m", None, [("user", "Generate a title for the chat below. " * 100)])
"""One message, as Open WebUI's title call: a side call when it follows its key's reply."""

# prompt, matched, learned s/token, fallback: the estimate
ESTIMATES = [
    (14_000, 0, 0.002, 0.005, 28.0),
    (1_000, 900, 0.002, 0.005, 0.2),
    (1_000, 1_200, 0.002, 0.005, 0.0),  # a match over the estimate counts as the whole prompt
    (1_000, 0, None, 0.005, 5.0),  # speed not learned yet: the policy's default
]


@pytest.mark.parametrize(("prompt", "matched", "per_token", "fallback", "expected"), ESTIMATES)
def test_the_prefill_estimate_is_the_uncached_prompt_at_the_learned_speed(
    prompt: int, matched: int, per_token: float | None, fallback: float, expected: float
) -> None:
    assert prefill_estimate_s(prompt, matched, per_token, fallback) == pytest.approx(expected)


# ends (prefill end of each of our leases), occupied, now: the bound
BOUNDS = [
    ([30.0, 40.0], 2, 10.0, 20.0),  # the earliest end
    ([30.0, 40.0], 2, 35.0, 0.0),  # overdue: free any moment, never negative
    ([30.0], 2, 10.0, NO_BOUND),  # a slot held by someone we don't see (a peer, a bypass)
    ([], 2, 10.0, NO_BOUND),
]


@pytest.mark.parametrize(("ends", "occupied", "now", "bound"), BOUNDS)
def test_the_bound_is_the_earliest_end_only_when_every_occupied_slot_is_ours(
    ends: list[float], occupied: int, now: float, bound: float
) -> None:
    prefills = PrefillsInFlight()
    for n, end in enumerate(ends):
        prefills.start(1, n, end)
    assert prefills.busy_for_s(1, occupied, now) == pytest.approx(bound)


def test_a_finished_lease_no_longer_bounds_its_target() -> None:
    prefills = PrefillsInFlight()
    prefills.start(1, "a", 30.0)
    prefills.finish(1, "a")
    prefills.finish(1, "a")  # twice, or never started: nothing to forget
    assert not prefills
    assert prefills.busy_for_s(1, 1, 0.0) == NO_BOUND


def test_an_engine_running_more_than_ours_gives_no_bound() -> None:
    prefills = PrefillsInFlight()
    prefills.start(1, "ours", 30.0)
    view = make_view(1, running=2, capacity=2)  # fresh Running: someone else holds a slot
    candidates, _ = build_candidates(
        [view],
        local_inflight={1: 1},
        peer_inflight={},
        last_reply_end={},
        router_waiting=0,
        matches={},
        default_capacity=2,
        fits_of=lambda _v: None,
        prefills=prefills,
    )
    assert candidates[0].free_slots == 0
    assert candidates[0].slots_busy_s is None


async def two_long_prompts_on_target_1(
    sched: Scheduler, targets: FakeTargets, index: PrefixIndex, clock: FakeClock
) -> list[Lease]:
    """Both of target 1's slots hold 14k-token prompts (28 s of prefill at 2 ms/token); the
    classifier's instruction is cached there; target 2 is idle and has learned nothing."""
    targets.add(make_view(1, prefill_s_per_token=0.002, service_s=0.6))
    targets.add(make_view(2, prefill_s_per_token=0.002, service_s=0.6, up=False))
    index.record(CLASSIFY, 1, 1, clock.now())
    index.record(TITLE, 1, 1, clock.now())
    long = [await sched.acquire(f"agent{n}", 1, RouteRequest("m", 14_000, None, n)) for n in (0, 1)]
    assert [lease.target.target_id for lease in long] == [1, 1]
    targets.update(2, up=True)
    return long


async def classify(
    sched: Scheduler, key: str = "classifier", chain: Chain = CLASSIFY
) -> asyncio.Future[Lease]:
    call = asyncio.ensure_future(sched.acquire(key, 1, RouteRequest("m", 1000, chain, 7)))
    await asyncio.sleep(0)  # an acquire that doesn't queue is done in its first step
    return call


async def test_a_classifier_call_takes_the_free_slot_while_long_prefills_hold_its_cache(
    sched: Scheduler, targets: FakeTargets, index: PrefixIndex, clock: FakeClock
) -> None:
    await two_long_prompts_on_target_1(sched, targets, index, clock)
    clock.advance(2.0)
    call = await classify(sched)
    assert call.done()
    assert call.result().target.target_id == 2
    assert sched.waiting_count() == 0


async def test_once_the_long_prefills_are_due_the_call_waits_for_its_cached_target(
    sched: Scheduler, targets: FakeTargets, index: PrefixIndex, clock: FakeClock
) -> None:
    long = await two_long_prompts_on_target_1(sched, targets, index, clock)
    clock.advance(28.5)  # both estimates passed: their slots may free any moment
    call = await classify(sched)
    assert not call.done()
    long[0].release(ok())
    assert (await call).target.target_id == 1


async def test_a_side_call_keeps_the_average_wait(
    sched: Scheduler, targets: FakeTargets, index: PrefixIndex, clock: FakeClock
) -> None:
    """Open WebUI's title and tags calls follow their key's reply at once and are charged for
    the conversation they'd push out of a slot; with the bound their wait outweighed that
    charge (webui seed 2: a tags call took a chat's slot, its next turn prefilled whole)."""
    await two_long_prompts_on_target_1(sched, targets, index, clock)
    turn = await sched.acquire("webui", 1, RouteRequest("m", 50, None, 9))
    assert turn.target.target_id == 2
    turn.release(ok())
    clock.advance(0.2)
    call = await classify(sched, key="webui", chain=TITLE)
    assert not call.done()
    call.cancel()
