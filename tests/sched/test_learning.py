"""What a released lease teaches: EWMA samples (spec §5 Stats) and prefix updates (spec §6, §9)."""

from __future__ import annotations

import asyncio

import pytest

from pharos.clock import FakeClock
from pharos.engine.types import Residency
from pharos.prefix import PrefixIndex, PrefixOp, chain_for_chat, chain_for_prompt
from pharos.sched import Feedback, RouteRequest, Scheduler
from pharos.sched.learning import (
    Dispatch,
    PrefixAction,
    Samples,
    prefix_action,
    prefix_outcome,
    samples_from,
)
from tests.sched.fakes import FakeTargets, make_view, ok

W, C, J = Dispatch.WARM, Dispatch.COLD, Dispatch.JOINED


@pytest.mark.parametrize(
    ("dispatch", "feedback", "expected"),
    [
        # prefill from the engine's own time per uncached token, on any dispatch
        (
            W,
            ok(prompt_tokens=1300, cached_tokens=300, engine_prefill_s=2.0),
            Samples(0.002, None, 3.0),
        ),
        # else from TTFT on a warm dispatch
        (W, ok(prompt_tokens=1256, cached_tokens=1000, ttft_s=0.512), Samples(0.002, None, 3.0)),
        # under 256 uncached tokens: fixed overhead, no prefill sample
        (W, ok(prompt_tokens=1255, cached_tokens=1000, ttft_s=0.5), Samples(None, None, 3.0)),
        # cached tokens unknown: no prefill sample (engines that do not report them)
        (W, ok(prompt_tokens=5000, cached_tokens=None, ttft_s=0.5), Samples(None, None, 3.0)),
        # prompt tokens unknown: none either
        (W, ok(prompt_tokens=None, cached_tokens=0, ttft_s=0.5), Samples(None, None, 3.0)),
        # cold: the load from the engine, no TTFT-based prefill; the service after the load
        (
            C,
            ok(prompt_tokens=2000, cached_tokens=0, engine_load_s=2.0, ttft_s=2.5),
            Samples(None, 2.0, 1.0),
        ),
        # an engine load time longer than the whole reply: no service sample
        (
            C,
            ok(prompt_tokens=2000, cached_tokens=0, engine_load_s=4.0, ttft_s=6.0),
            Samples(None, 4.0, None),
        ),
        # cold without an engine load time: TTFT is the load, the rest of the reply the service
        (C, ok(prompt_tokens=2000, cached_tokens=0, ttft_s=2.0), Samples(None, 2.0, 1.0)),
        (C, ok(prompt_tokens=2000, cached_tokens=0, ttft_s=6.0), Samples(None, 6.0, None)),
        # cold but the engine loaded nothing (< 10 ms): counts as warm
        (
            C,
            ok(prompt_tokens=2000, cached_tokens=0, engine_load_s=0.0005, ttft_s=2.0),
            Samples(0.001, None, 3.0),
        ),
        # cold with a TTFT under 10 ms: no load sample, the reply after it is the service
        (C, ok(ttft_s=0.005), Samples(None, None, 2.995)),
        # cold with no first byte: nothing to learn about the load
        (C, ok(ttft_s=None), Samples()),
        # warm but the engine loaded the model (unexpected_load): learned as a load
        (W, ok(engine_load_s=0.6, ttft_s=0.9), Samples(None, 0.6, 2.4)),
        # joined a load under way: a partial load teaches no load, the rest of the reply the
        # service (without it a cold burst costed waiting at the assumed 5 s: issue 14)
        (J, ok(prompt_tokens=2000, cached_tokens=0, ttft_s=2.0), Samples(None, None, 1.0)),
        # joined, and the engine reports a load time: only the part of the load this request
        # waited for, so it is no load sample either (it would teach a load too short)
        (J, ok(engine_load_s=1.2, ttft_s=1.5), Samples(None, None, 1.8)),
        # the client left: the duration is cut short
        (W, ok(client_left=True), Samples()),
        # failed replies teach nothing
        (W, ok(status=500, prompt_tokens=2000, cached_tokens=0, engine_prefill_s=1.0), Samples()),
        (W, ok(status=None), Samples()),
        (W, ok(died_mid_reply=True), Samples()),
    ],
)
def test_samples_from_feedback(dispatch: Dispatch, feedback: Feedback, expected: Samples):
    got = samples_from(feedback, dispatch, control=False)
    assert got.prefill_s_per_token == pytest.approx(expected.prefill_s_per_token)
    assert got.load_s == pytest.approx(expected.load_s)
    assert got.service_s == pytest.approx(expected.service_s)


def test_control_requests_teach_nothing():
    fb = ok(prompt_tokens=2000, cached_tokens=0, engine_load_s=3.0, engine_prefill_s=1.0)
    assert samples_from(fb, C, control=True).empty


@pytest.mark.parametrize(
    ("feedback", "predicted", "action"),
    [
        (ok(cached_tokens=900), 1000, PrefixAction.RECORD),
        (ok(cached_tokens=500), 1000, PrefixAction.RECORD),  # exactly half: not wrong
        (ok(cached_tokens=499), 1000, PrefixAction.CORRECT),
        (ok(cached_tokens=None), 1000, PrefixAction.RECORD),  # unknown: no verdict
        (ok(cached_tokens=0), None, PrefixAction.RECORD),
        # a claim under MIN_WRONG_TOKENS (a 14-token system prompt) that missed proves nothing
        (ok(cached_tokens=0), 31, PrefixAction.RECORD),
        (ok(cached_tokens=0), 32, PrefixAction.CORRECT),
        (ok(status=500), 1000, PrefixAction.CORRECT),
        (ok(status=400), None, PrefixAction.CORRECT),
        (ok(status=None), 1000, PrefixAction.NONE),  # never answered
        (ok(died_mid_reply=True), 1000, PrefixAction.NONE),
    ],
)
def test_prefix_action(feedback: Feedback, predicted: int | None, action: PrefixAction):
    assert prefix_action(feedback, predicted) is action


@pytest.mark.parametrize(
    ("predicted", "cached", "outcome"),
    [
        (1000, 800, "predicted_hit"),
        (1000, 100, "wrong_prediction"),
        (None, 300, "unpredicted_hit"),
        (None, 0, "miss"),
        (1000, None, "unknown"),
    ],
)
def test_prefix_outcome(predicted: int | None, cached: int | None, outcome: str):
    assert prefix_outcome(predicted, cached) == outcome


PROMPT = "x" * 8192  # 8 blocks of 1 KiB: 2048 tokens at 4 bytes per token


def chat_req(**kw: object) -> RouteRequest:
    return RouteRequest(
        model="m",
        prompt_tokens=2048,
        chain=chain_for_prompt("m", PROMPT),
        seed=0,
        **kw,  # type: ignore[arg-type]
    )


async def test_success_records_the_prompt_and_the_next_lease_predicts_it(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp], clock: FakeClock
):
    view = targets.add(make_view(1, capacity=4))
    first = await sched.acquire("k", 1, chat_req())
    assert first.predicted is None
    first.release(ok(prompt_tokens=2048, cached_tokens=0, ttft_s=2.048))
    assert targets.observed == [(1, pytest.approx(0.001), None, 3.0)]
    assert targets.succeeded == [(1, clock.now())]
    assert [(op.target_key, op.remove) for op in prefix_ops] == [(view.key, False)]
    assert prefix_ops[0].last_used_s == clock.time()
    second = await sched.acquire("k", 1, chat_req())
    assert second.predicted is not None
    assert second.predicted.matched_bytes == 8192
    assert second.predicted_tokens == 2048
    assert second.candidate.matched_tokens == 2048


async def test_a_wrong_prediction_is_corrected(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp], index: PrefixIndex
):
    targets.add(make_view(1, capacity=4))
    chain = chain_for_prompt("m", PROMPT)
    index.record(chain, 1, generation=1, now_s=0.0)
    lease = await sched.acquire("k", 1, chat_req())
    assert lease.predicted_tokens == 2048
    feedback = ok(prompt_tokens=2048, cached_tokens=10)
    assert lease.prefix_outcome(feedback) == "wrong_prediction"
    lease.release(feedback)
    assert index.lookup(chain, lambda _tid: 1) == {}
    assert [op.remove for op in prefix_ops] == [True]


async def test_a_follow_up_whose_reply_was_not_cached_keeps_its_conversation_recorded(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp], index: PrefixIndex
):
    # The client sent back another reply than the engine generated (make scenario sends
    # ShareGPT's answers: predicted 172 tokens with the reply, the engine cached 31): the
    # index's own record held, only the reply credit was wrong. Forgetting the chain sent
    # the next turn anywhere (3 of 3 moved follow-ups in the diagnostic run).
    turn_one = chain_for_chat("m", None, [("system", "s" * 40), ("user", "q" * 400)])
    turn_two = chain_for_chat(
        "m",
        None,
        [("system", "s" * 40), ("user", "q" * 400), ("assistant", "a" * 4000), ("user", "n")],
    )
    targets.add(make_view(1, capacity=4))
    index.record(turn_one, 1, generation=1, now_s=0.0)
    request = RouteRequest(model="m", prompt_tokens=1110, chain=turn_two, seed=0)
    lease = await sched.acquire("k", 1, request)
    assert lease.predicted_tokens == 1110  # the reply credited
    lease.release(ok(prompt_tokens=1110, cached_tokens=110))  # the previous prompt only
    assert index.lookup(turn_two, lambda _tid: 1)[1].matched_bytes == turn_two.cum_bytes[-1]
    assert [op.remove for op in prefix_ops] == [False]


async def test_an_engine_error_forgets_the_prompt_and_teaches_nothing(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp], index: PrefixIndex
):
    targets.add(make_view(1, capacity=4))
    chain = chain_for_prompt("m", PROMPT)
    index.record(chain, 1, generation=1, now_s=0.0)
    lease = await sched.acquire("k", 1, chat_req())
    lease.release(ok(status=500))
    assert index.lookup(chain, lambda _tid: 1) == {}
    assert targets.observed == []
    assert targets.succeeded == []
    assert [op.remove for op in prefix_ops] == [True]


async def test_a_stale_generation_is_not_predicted(
    sched: Scheduler, targets: FakeTargets, index: PrefixIndex
):
    targets.add(make_view(1, capacity=4, generation=2))
    index.record(chain_for_prompt("m", PROMPT), 1, generation=1, now_s=0.0)
    lease = await sched.acquire("k", 1, chat_req())
    assert lease.predicted is None


async def test_release_twice_is_a_no_op(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp]
):
    targets.add(make_view(1, capacity=2))
    a = await sched.acquire("k", 1, chat_req())
    b = await sched.acquire("k", 1, chat_req())
    a.release(ok())
    a.release(ok())
    assert sched.inflight(1) == 1
    assert len(targets.observed) == 1
    assert len(prefix_ops) == 1
    assert a.released and not b.released
    b.release(ok())
    assert sched.inflight(1) == 0


async def test_control_requests_update_nothing(
    sched: Scheduler, targets: FakeTargets, prefix_ops: list[PrefixOp]
):
    targets.add(make_view(1, residency=Residency.COLD))
    lease = await sched.acquire("k", 1, chat_req(control=True))
    fb = ok(engine_load_s=3.0)
    assert lease.load_outcome(fb) == "control"
    lease.release(fb)
    assert targets.observed == [] and targets.succeeded == [] and prefix_ops == []


async def test_cold_dispatch_learns_the_load(sched: Scheduler, targets: FakeTargets):
    targets.add(make_view(1, residency=Residency.COLD))
    lease = await sched.acquire("k", 1, RouteRequest("m", 100, None, 0))
    fb = ok(ttft_s=7.5)
    assert lease.load_outcome(fb) == "cold_start"
    lease.release(fb)
    assert targets.observed == [(1, None, 7.5, None)]


async def test_no_learning_without_samples_still_frees_the_slot(
    sched: Scheduler, targets: FakeTargets
):
    targets.add(make_view(1, capacity=1))
    lease = await sched.acquire("k", 1, RouteRequest("m", 100, None, 0))
    waiter = asyncio.ensure_future(sched.acquire("k", 1, RouteRequest("m", 100, None, 1)))
    await asyncio.sleep(0)
    lease.release(ok(status=None))
    await asyncio.sleep(0)
    assert waiter.done()
    assert targets.observed == []
