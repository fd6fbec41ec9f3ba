"""A side call beside a turn doesn't take the conversation's slot (issue 16).

Open WebUI sends a title and a tags call the moment each turn ends, each a single fresh user
message. On an engine that caches per slot, one landing on the slot that holds the chat
pushes it out, and turn 2 prefills in full (observed: 0 of 6,210 cached).
"""

from __future__ import annotations

import pytest

from pharos.clock import FakeClock
from pharos.engine.types import Kind
from pharos.prefix import Chain, chain_for_chat, chain_for_prompt
from pharos.sched import RouteRequest, Scheduler
from pharos.sched.candidates import SLOT_KEEP_S, evicted_tokens
from tests.sched.fakes import FakeTargets, make_view, ok

TURN = chain_for_chat("m", None, [("system", "s" * 400), ("user", "q" * 3600)])  # 1,000 tok


def side_call(seed: int) -> RouteRequest:
    """Open WebUI's title call: one user message (a side call is one message)."""
    task = f"### Task: title {seed} " * 200
    return RouteRequest("m", 1200, chain_for_chat("m", None, [("user", task)]), seed)


async def serve_a_turn(sched: Scheduler, targets: FakeTargets, kind: Kind) -> None:
    """Alice's turn ends on target 1 (one slot each); target 2 has never served anything."""
    targets.add(make_view(1, capacity=1, kind=kind))
    lease = await sched.acquire("alice", 1, RouteRequest("m", 1000, TURN, 0))
    assert lease.target.target_id == 1
    lease.release(ok())
    targets.add(make_view(2, capacity=1, kind=kind))


# gap_s: from the turn's end to the next request of the same key; kind: the engines' kind;
# charged: whether target 1's estimate carries the conversation it would push out
CASES = [
    (0.2, Kind.LLAMACPP, True),  # a side call on a per-slot engine
    (0.2, Kind.OLLAMA, True),
    (10.0, Kind.LLAMACPP, False),  # a person's next request: never charged
    (0.2, Kind.VLLM, False),  # a shared cache: nothing is pushed out
]


@pytest.mark.parametrize(("gap_s", "kind", "charged"), CASES)
async def test_a_side_call_is_charged_for_the_conversation_it_would_push_out(
    sched: Scheduler,
    targets: FakeTargets,
    clock: FakeClock,
    gap_s: float,
    kind: Kind,
    charged: bool,
) -> None:
    await serve_a_turn(sched, targets, kind)
    clock.advance(gap_s)
    for seed in range(8):  # whichever way the seed breaks ties
        lease = await sched.acquire("alice", 1, side_call(seed))
        evict = lease.decision.score_of(1)
        assert evict is not None
        assert (evict.evict_s > 0) is charged
        if charged:
            assert lease.target.target_id == 2
            assert lease.candidate.evicts_tokens == 0
        lease.abandon()


async def test_the_side_calls_own_slot_is_not_kept_and_the_turn_still_is(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    await serve_a_turn(sched, targets, Kind.LLAMACPP)
    clock.advance(0.1)
    side = await sched.acquire("alice", 1, side_call(0))
    assert side.target.target_id == 2
    side.release(ok())
    clock.advance(0.1)  # the tags call: target 2's slot holds only a title call
    tags = await sched.acquire("alice", 1, side_call(1))
    assert tags.target.target_id == 2
    assert tags.decision.score_of(2) is not None
    assert tags.decision.score_of(2).evict_s == 0  # type: ignore[union-attr]
    tags.abandon()


async def test_another_keys_request_on_the_only_free_slot_is_not_charged(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    await serve_a_turn(sched, targets, Kind.LLAMACPP)
    clock.advance(0.2)
    lease = await sched.acquire("bob", 1, side_call(0))  # bob's first request: not beside a reply
    assert lease.decision.score_of(1).evict_s == 0  # type: ignore[union-attr]
    lease.abandon()


# recent: (ended_at, tokens, link) oldest first; free: free slots; evicted: tokens pushed out
@pytest.mark.parametrize(
    ("recent", "free", "evicted"),
    [
        ([(90.0, 500, 1), (95.0, 800, 2)], 1, 800),  # one free slot: it holds the newest
        ([(90.0, 500, 1), (95.0, 800, 2)], 2, 500),  # two: the fresh prompt takes the older
        ([(95.0, 800, 2)], 2, 0),  # a free slot holds nothing kept
        ([(100.0 - SLOT_KEEP_S - 1, 800, 2)], 1, 0),  # ended too long ago to come back
        ([(95.0, 800, 2)], 0, 0),  # no free slot: nothing is pushed out now
    ],
)
def test_evicted_tokens_is_the_least_recently_used_kept_slot(
    recent: list[tuple[float, int, int]], free: int, evicted: int
) -> None:
    assert evicted_tokens(recent, free, now=100.0) == evicted


# what the key sends 0.2 s after its reply ended: whether it is a side call, charged for the
# conversation it would push out of target 1's one slot
SHAPES = [
    (chain_for_chat("m", None, [("user", "### Task: tags " * 200)]), True),  # Open WebUI's
    (chain_for_chat("m", None, [("system", "s" * 400), ("user", "q" * 3000)]), False),
    (
        chain_for_chat(
            "m", None, [("system", "s"), ("user", "a"), ("assistant", "b"), ("user", "c" * 3000)]
        ),
        False,  # another person's follow-up on a shared key
    ),
    (chain_for_prompt("m", "### Task: tags " * 60), True),  # a raw prompt of one 1 KiB block
    (chain_for_prompt("m", "### Task: tags " * 200), False),  # of four
]


@pytest.mark.parametrize(("chain", "charged"), SHAPES)
async def test_only_a_single_message_sent_right_after_the_keys_reply_is_a_side_call(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock, chain: Chain, charged: bool
) -> None:
    """One key for many people (`make scenario`'s anonymous key): another person's turn often
    comes within SIDE_CALL_GAP_S of a reply (real-equal: 1,495 of 4,101 turns), and as a side
    call it was charged for an idle engine's slots and queued for the busy one."""
    await serve_a_turn(sched, targets, Kind.LLAMACPP)
    clock.advance(0.2)
    lease = await sched.acquire("alice", 1, RouteRequest("m", 1200, chain, 0))
    score = lease.decision.score_of(1)
    assert score is not None
    assert (score.evict_s > 0) is charged
    assert lease.side_call is charged
    lease.abandon()
