"""A request's release goes by whether it was a side call when it arrived (issue 13, issue 16).

The lease carries its key and side call (no per-lease dict in the scheduler). A request that
queued behind its own key's reply is judged a side call by the queue when granted (that reply
ended after it was sent), but its release must still keep its slot as the turn it was sent as.
"""

from __future__ import annotations

import asyncio

import pytest

from pharos.clock import FakeClock
from pharos.engine.types import Kind
from pharos.prefix import Chain, chain_for_chat
from pharos.sched import RouteRequest, Scheduler
from tests.sched.fakes import FakeTargets, make_view, ok

TURN_0 = chain_for_chat("m", None, [("system", "s" * 400), ("user", "z" * 3600)])
TURN_1 = chain_for_chat("m", None, [("system", "s" * 400), ("user", "a" * 3600)])
TURN_2 = chain_for_chat("m", None, [("system", "s" * 400), ("user", "b" * 3600)])
ONE_MESSAGE = chain_for_chat("m", None, [("user", "b" * 4000)])
SIDE = chain_for_chat("m", None, [("user", "### Task: title " * 200)])  # one message


# holder: whose request holds the one slot while alice's waits; replied_before_s: alice's last
# reply ended this long before she sent hers (None: no reply yet); what she sent | her slot
# kept (the next side call is charged for pushing it out)
CASES = [
    ("alice", None, ONE_MESSAGE, True),  # a turn; her own reply ends while it waits: still kept
    ("bob", 0.2, ONE_MESSAGE, False),  # a side call when sent: not kept
    ("bob", 0.2, TURN_2, True),  # two messages: no side call (another person on a shared key)
]


@pytest.mark.parametrize(("holder", "replied_before_s", "sent", "kept"), CASES)
async def test_a_queued_request_keeps_its_slot_as_what_it_was_when_sent(
    sched: Scheduler,
    targets: FakeTargets,
    clock: FakeClock,
    holder: str,
    replied_before_s: float | None,
    sent: Chain,
    kept: bool,
) -> None:
    targets.add(make_view(1, capacity=1, kind=Kind.LLAMACPP))
    if replied_before_s is not None:
        (await sched.acquire("alice", 1, RouteRequest("m", 1000, TURN_0, 0))).release(ok())
    clock.advance(10.0 if replied_before_s is None else replied_before_s)
    first = await sched.acquire(holder, 1, RouteRequest("m", 1000, TURN_1, 1))
    waiting = asyncio.ensure_future(sched.acquire("alice", 1, RouteRequest("m", 1000, sent, 2)))
    await asyncio.sleep(0)
    assert sched.waiting_count() == 1
    clock.advance(1.0)
    first.release(ok())  # the queued request gets the slot
    second = await waiting
    assert second.waited
    clock.advance(10.0)
    second.release(ok())
    clock.advance(0.1)
    side = await sched.acquire("alice", 1, RouteRequest("m", 1200, SIDE, 3))
    score = side.decision.score_of(1)
    assert score is not None
    assert (score.evict_s > 0) is kept
    side.abandon()
