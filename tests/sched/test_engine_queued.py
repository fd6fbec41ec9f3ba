"""What replies teach about waiting inside the engine, and how long that lesson lasts."""

from __future__ import annotations

import pytest

from pharos.clock import FakeClock
from pharos.prefix import chain_for_prompt
from pharos.sched import Feedback, RouteRequest, Scheduler
from pharos.sched.learning import Dispatch, engine_queued_sample
from pharos.sched.scheduler import ENGINE_QUEUED_HALF_LIFE_S
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
