"""The `prefix` decision stage says what the scheduler judged the reply by (spec §6, §13)."""

from __future__ import annotations

import pytest

from pharos.prefix import PrefixIndex, PrefixOp, chain_for_chat, chain_for_prompt
from pharos.sched import RouteRequest, Scheduler
from tests.sched.fakes import FakeTargets, make_view, ok

SYSTEM, ASKED, ANSWERED = "s" * 40, "q" * 400, "a" * 4000


async def test_a_follow_up_whose_reply_was_not_cached_counts_as_a_predicted_hit(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp], index: PrefixIndex
):
    # make scenario sends ShareGPT's answers back: the engine cached the previous prompt as the
    # index recorded it (110 tokens) and not the reply credited on top (1,110). Nothing was
    # corrected, yet the metric said wrong_prediction: ~10 per real-engine run.
    turn_one = chain_for_chat("m", None, [("system", SYSTEM), ("user", ASKED)])
    turn_two = chain_for_chat(
        "m", None, [("system", SYSTEM), ("user", ASKED), ("assistant", ANSWERED), ("user", "n")]
    )
    targets.add(make_view(1, capacity=4))
    index.record(turn_one, 1, generation=1, now_s=0.0)
    lease = await sched.acquire("k", 1, RouteRequest("m", 1110, chain=turn_two, seed=0))
    feedback = ok(prompt_tokens=1110, cached_tokens=110)
    lease.release(feedback)
    assert [op.remove for op in prefix_ops] == [False]  # recorded, not corrected
    assert lease.prefix_outcome(feedback) == "predicted_hit"


# predicted: tokens the index recorded of the prompt (bytes / 4); cached: what the engine
# reported; removed: whether the index forgot the prompt; outcome: what the metric says,
# always what the index did
CASES = [
    (2048, 2048, False, "predicted_hit"),
    (2048, 1000, True, "wrong_prediction"),  # under half: corrected
    (2048, 10, True, "wrong_prediction"),
    (40, 10, False, "predicted_hit"),  # under half, but 30 short: under MIN_WRONG_TOKENS
]


@pytest.mark.parametrize(("predicted", "cached", "removed", "outcome"), CASES)
async def test_the_metric_calls_a_prediction_wrong_exactly_when_the_index_corrects_it(
    sched: Scheduler,
    targets: FakeTargets,
    prefix_ops: list[PrefixOp],
    index: PrefixIndex,
    predicted: int,
    cached: int,
    removed: bool,
    outcome: str,
):
    targets.add(make_view(1, capacity=4))
    chain = chain_for_prompt("m", "x" * (4 * predicted))
    index.record(chain, 1, generation=1, now_s=0.0)
    lease = await sched.acquire("k", 1, RouteRequest("m", predicted, chain=chain, seed=0))
    assert lease.predicted_tokens == predicted
    feedback = ok(prompt_tokens=predicted, cached_tokens=cached)
    lease.release(feedback)
    assert [op.remove for op in prefix_ops] == [removed]
    assert lease.prefix_outcome(feedback) == outcome


async def test_an_unreleased_lease_is_judged_without_the_reply_credit(
    sched: Scheduler, targets: FakeTargets, index: PrefixIndex
):
    turn_one = chain_for_chat("m", None, [("system", SYSTEM), ("user", ASKED)])
    turn_two = chain_for_chat(
        "m", None, [("system", SYSTEM), ("user", ASKED), ("assistant", ANSWERED), ("user", "n")]
    )
    targets.add(make_view(1, capacity=4))
    index.record(turn_one, 1, generation=1, now_s=0.0)
    lease = await sched.acquire("k", 1, RouteRequest("m", 1110, chain=turn_two, seed=0))
    assert lease.prefix_outcome(ok(prompt_tokens=1110, cached_tokens=110)) == "predicted_hit"
    lease.release(ok(prompt_tokens=1110, cached_tokens=110))
