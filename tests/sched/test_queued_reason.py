"""A request granted from the fair queue keeps the decision made when it queued, so its reason
can say what the wait was expected to be. On the real speed fleet (make scenario, 2026-12-07)
turns granted 3.5-5.2 s after they queued showed only the grant's `wait 33-63 ms`."""

from __future__ import annotations

import asyncio

from pharos.clock import FakeClock
from pharos.policy import Decision
from pharos.policy.explain import ENGINE_QUEUE_NOTE
from pharos.proxy.done import RequestRecord, finish
from pharos.sched import RouteRequest, Scheduler
from tests.sched.fakes import FakeTargets, make_view, ok


def req() -> RouteRequest:
    return RouteRequest(model="m", prompt_tokens=1000, chain=None, seed=0)


async def test_a_waiter_keeps_the_decision_it_queued_by_and_an_immediate_lease_has_none(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
) -> None:
    # one slot, a 4 s service time: the second request expects the slot in 4 * 1/2 = 2 s
    targets.add(make_view(1, capacity=1, service_s=4.0))
    first = await sched.acquire("k", 1, req())
    assert first.queued_by is None
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(5.0)
    first.release(ok())
    await asyncio.sleep(0)
    second = task.result()
    assert second.queue_wait_s == 5.0
    assert second.queued_by is not None
    assert "wait 2.0s" in second.queued_by.reason
    assert "wait" not in second.decision.reason  # granted on a free slot: no wait left


def _decision(reason: str, enqueue: bool) -> Decision:
    return Decision(1, enqueue, "cache", lambda: (), lambda: reason)


# granted_reason, arrival_reason, queue_wait_s, expected
CASES = [
    (
        "warm, 219 cached tok, est 0.1s vs 7.5s (less cached)",
        f"warm, 219 cached tok, wait 0.3s, est 0.5s vs 7.5s (less cached), {ENGINE_QUEUE_NOTE}",
        4.57,
        "warm, 219 cached tok, est 0.1s vs 7.5s (less cached); queued 4.6s, on arrival: "
        "warm, 219 cached tok, wait 0.3s, est 0.5s vs 7.5s (less cached)",
    ),
    (
        "warm, est 0.1s",
        "no feasible target: 2 cold loads would evict busy models",
        0.05,
        "warm, est 0.1s; queued 50ms, on arrival: no feasible target: 2 cold loads would evict "
        "busy models",
    ),
]


def test_a_waited_requests_reason_says_how_long_it_queued_and_what_was_expected_then() -> None:
    for granted, arrival, waited_s, expected in CASES:
        record = RequestRecord(route="chat", started_s=0.0)
        record.decision = _decision(granted, enqueue=False)
        record.queued_by = _decision(arrival, enqueue=True)
        record.queue_wait_s = waited_s
        assert finish(record, 200, 1.0, 0.0).reason == expected


def test_a_request_that_never_queued_keeps_its_plain_reason() -> None:
    record = RequestRecord(route="chat", started_s=0.0)
    record.decision = _decision("warm, est 0.1s", enqueue=False)
    record.queue_wait_s = 0.0
    assert finish(record, 200, 1.0, 0.0).reason == "warm, est 0.1s"
