"""What replies teach about waiting inside the engine, and how long that lesson lasts."""

from __future__ import annotations

import pytest

from pharos.clock import FakeClock
from pharos.prefix import chain_for_prompt
from pharos.sched import Feedback, RouteRequest, Scheduler
from pharos.sched.learning import Dispatch, engine_queued_sample
from pharos.sched.reply_learner import ENGINE_QUEUED_HALF_LIFE_S
from pharos.state.stats import ewma
from tests.sched.fakes import FakeTargets, make_view, ok

# feedback, dispatch: the engine-side wait it teaches (None: nothing)
CASES = [
    (ok(ttft_s=3.0, engine_prefill_s=1.0), Dispatch.WARM, 2.0),
    (ok(ttft_s=0.9, engine_prefill_s=1.0), Dispatch.WARM, 0.0),  # clocks apart: never below 0
    (ok(ttft_s=3.0), Dispatch.WARM, None),  # no engine prefill time (vLLM): unknown
    (ok(ttft_s=None, engine_prefill_s=1.0), Dispatch.WARM, None),
    (ok(ttft_s=9.0, engine_prefill_s=1.0), Dispatch.COLD, None),  # the load is in the TTFT
    (ok(ttft_s=9.0, engine_prefill_s=1.0, engine_load_s=6.0), Dispatch.WARM, None),
    (ok(status=500, ttft_s=3.0, engine_prefill_s=1.0), Dispatch.WARM, None),
]


@pytest.mark.parametrize(("feedback", "dispatch", "expected"), CASES)
def test_a_warm_reply_teaches_its_ttft_less_the_engines_prefill(
    feedback: Feedback, dispatch: Dispatch, expected: float | None
) -> None:
    got = engine_queued_sample(feedback, dispatch)
    assert got == (None if expected is None else pytest.approx(expected))


def request() -> RouteRequest:
    return RouteRequest(
        model="m", prompt_tokens=100, chain=chain_for_prompt("m", "x" * 400), seed=0
    )


async def test_the_engine_side_wait_reaches_the_candidate_and_halves_with_time(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=4))
    first = await sched.acquire("k", 1, request())
    assert first.candidate.engine_queued_s is None  # nothing learned yet
    first.release(ok(ttft_s=2.5, engine_prefill_s=0.5))
    second = await sched.acquire("k", 1, request())
    assert second.candidate.engine_queued_s == pytest.approx(2.0)
    second.release(ok(status=500))  # teaches nothing
    clock.advance(ENGINE_QUEUED_HALF_LIFE_S)
    third = await sched.acquire("k", 1, request())
    assert third.candidate.engine_queued_s == pytest.approx(1.0)


# feedback, our own prefill expected still to run on the target at dispatch (s): what it teaches
BESIDE_OURS = [
    (ok(ttft_s=3.0, engine_prefill_s=1.0), 1.5, 0.5),  # 2 s inside the engine, 1.5 s our batch
    (ok(ttft_s=3.0, engine_prefill_s=1.0), 2.5, 0.0),  # longer than it waited: never below 0
    (ok(ttft_s=3.0, engine_prefill_s=1.0), 0.0, 2.0),  # nothing of ours ahead: all of it
]


@pytest.mark.parametrize(("feedback", "ours_ahead_s", "expected"), BESIDE_OURS)
def test_the_wait_behind_our_own_prefill_in_flight_is_not_counted_as_traffic_we_dont_see(
    feedback: Feedback, ours_ahead_s: float, expected: float
) -> None:
    """llama-server computes one batch at a time: a prompt sent while another of ours
    prefills there waits for that batch inside the engine (tools/measure_beside_decode.py).
    That wait is ours, already known; engine_queued_s prices only what Pharos doesn't see."""
    got = engine_queued_sample(feedback, Dispatch.WARM, ours_ahead_s)
    assert got == pytest.approx(expected)


def long_request() -> RouteRequest:
    """1,000 estimated tokens: 1 s of prefill at the view's 1 ms a token."""
    return RouteRequest(
        model="m", prompt_tokens=1000, chain=chain_for_prompt("m", "y" * 4000), seed=0
    )


async def test_a_reply_sent_beside_our_own_prefill_teaches_only_the_rest_of_its_wait(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    targets.add(make_view(1, capacity=4))
    first = await sched.acquire("k", 1, long_request())  # prefill expected to end at 1.0 s
    clock.advance(0.25)
    second = await sched.acquire("k", 1, request())  # 0.75 s of ours still ahead of it
    second.release(ok(ttft_s=1.25, engine_prefill_s=0.1))  # 1.15 s inside: 0.75 ours, 0.4 not
    first.release(ok(ttft_s=1.0, engine_prefill_s=1.0))  # waited nothing: teaches 0
    third = await sched.acquire("k", 1, request())
    # EWMA of 0.4 then 0.0: what the scheduler's ewma makes of the two samples
    assert third.candidate.engine_queued_s == pytest.approx(ewma(0.4, 0.0))
