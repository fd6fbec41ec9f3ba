"""From the outside in: the scheduler, its prefix index and the cost policy place a new
conversation on equal engines by load, not by which one learned a few per cent faster; a
follow-up stays with its cache (issue 15)."""

from __future__ import annotations

from pharos.clock import FakeClock
from pharos.prefix import Chain, PrefixIndex, chain_for_chat
from pharos.sched import RouteRequest, Scheduler
from tests.sched.fakes import FakeTargets, make_view

SYSTEM = ("system", "You are a helpful assistant. " * 16)  # ~120 tokens, on both engines


def _first_turn(user: str) -> Chain:
    return chain_for_chat("m", None, [SYSTEM, ("user", user)])


def _fleet(busy_per_token_s: float) -> tuple[Scheduler, PrefixIndex]:
    targets = FakeTargets()
    targets.add(make_view(1, prefill_s_per_token=busy_per_token_s))
    targets.add(make_view(2, prefill_s_per_token=0.0010))
    index = PrefixIndex()
    system_only = chain_for_chat("m", None, [SYSTEM])
    for target_id in (1, 2):
        index.record(system_only, target_id, generation=1, now_s=0.0)
    return Scheduler(targets, index, FakeClock()), index


def _request(chain: Chain, seed: int) -> RouteRequest:
    return RouteRequest("m", chain.cum_bytes[-1] // 4, chain, seed)


async def test_a_new_conversation_goes_to_the_idle_engine_when_the_busy_one_learned_5pct_faster():
    sched, _ = _fleet(busy_per_token_s=0.00095)
    held = await sched.acquire("a", 1, _request(_first_turn("first chat " * 200), 0))
    assert held.target.target_id == 1  # both idle: a tie, which seed 0 gives to target 1
    second = await sched.acquire("b", 1, _request(_first_turn("second chat " * 200), 0))
    assert second.target.target_id == 2  # one speed: the idle target wins on utilization


async def test_a_new_conversation_still_goes_to_an_engine_learned_30pct_faster_though_busier():
    sched, _ = _fleet(busy_per_token_s=0.0007)
    held = await sched.acquire("a", 1, _request(_first_turn("first chat " * 200), 0))
    assert held.target.target_id == 1
    second = await sched.acquire("b", 1, _request(_first_turn("second chat " * 200), 1))
    assert second.target.target_id == 1


async def test_a_follow_up_stays_on_the_engine_holding_its_conversation():
    sched, index = _fleet(busy_per_token_s=0.0010)
    turn1 = [SYSTEM, ("user", "question " * 200)]
    index.record(chain_for_chat("m", None, turn1), 2, generation=1, now_s=1.0)
    turn2 = chain_for_chat("m", None, [*turn1, ("assistant", "answer " * 50), ("user", "more")])
    held = await sched.acquire("a", 1, _request(_first_turn("other chat " * 200), 1))
    assert held.target.target_id == 2  # a tie, which seed 1 gives to target 2: now the busier
    lease = await sched.acquire("b", 1, _request(turn2, 1))
    assert lease.target.target_id == 2
