"""No request waits forever (issue 11, "Time"): a queue wait has a bound, and a model that
fits no host fails at once naming its size and the memory limit. Time is a FakeClock."""

from __future__ import annotations

import asyncio

import pytest

from pharos.clock import FakeClock
from pharos.engine.types import Residency
from pharos.prefix import PrefixIndex
from pharos.sched import NeverFits, QueueTimeout, RouteRequest, Scheduler
from tests.sched.fakes import FakeTargets, make_view, ok

GB = 1024**3  # memory_gb counts GiB

BOUND_S = 600.0


def req() -> RouteRequest:
    return RouteRequest(model="m", prompt_tokens=100, chain=None, seed=0)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_wait_past_the_bound_fails_with_the_reason() -> None:
    """A fake vLLM reporting 2 running and 2 waiting held a request 60 s, until the client
    gave up: every target saturated by the engine's own signals."""
    clock = FakeClock()
    targets = FakeTargets()
    targets.add(make_view(1, running=2, waiting=2, capacity=2))
    sched = Scheduler(targets, PrefixIndex(), clock, queue_wait_s=BOUND_S)
    waiting = asyncio.ensure_future(sched.acquire("alice", 1, req()))
    await settle()
    assert sched.waiting_count() == 1
    clock.advance(BOUND_S - 1)
    sched.kick()  # a scrape round ends: still saturated, still within the bound
    await settle()
    assert not waiting.done()
    clock.advance(1)
    sched.kick()
    await settle()
    with pytest.raises(QueueTimeout) as caught:
        await waiting
    assert caught.value.waited_s == BOUND_S
    assert "600" in str(caught.value) and "busy" in str(caught.value)
    assert sched.waiting_count() == 0


async def test_the_bound_fires_without_any_other_event() -> None:
    """Nothing kicks the queue (no scrape, no release): the waiter's own timer does."""
    targets = FakeTargets()
    targets.add(make_view(1, running=2, waiting=2, capacity=2))
    loop = asyncio.get_running_loop()

    class LoopClock(FakeClock):
        def now(self) -> float:
            return loop.time()

    sched = Scheduler(targets, PrefixIndex(), LoopClock(), queue_wait_s=0.05)
    async with asyncio.timeout(5):
        with pytest.raises(QueueTimeout):
            await sched.acquire("alice", 1, req())


async def test_a_grant_within_the_bound_is_unaffected() -> None:
    clock = FakeClock()
    targets = FakeTargets()
    targets.add(make_view(1, capacity=1))
    sched = Scheduler(targets, PrefixIndex(), clock, queue_wait_s=BOUND_S)
    first = await sched.acquire("alice", 1, req())
    waiting = asyncio.ensure_future(sched.acquire("bob", 1, req()))
    await settle()
    clock.advance(BOUND_S - 1)
    first.release(ok())
    await settle()
    assert waiting.done() and waiting.result().queue_wait_s == BOUND_S - 1


# size_gb, memory_gb per host, residency: every host too small for a cold model
NEVER = [
    (1.3, (1.0,), Residency.COLD),
    (8.0, (4.0, 6.0), Residency.COLD),
]


@pytest.mark.parametrize(("size_gb", "memories_gb", "residency"), NEVER)
async def test_a_model_larger_than_every_host_fails_at_once(
    size_gb: float, memories_gb: tuple[float, ...], residency: Residency
) -> None:
    targets = FakeTargets()
    for index, memory_gb in enumerate(memories_gb):
        targets.add(
            make_view(
                index + 1,
                residency=residency,
                size_bytes=int(size_gb * GB),
                memory_bytes=int(memory_gb * GB),
            )
        )
    sched = Scheduler(targets, PrefixIndex(), FakeClock(), queue_wait_s=BOUND_S)
    with pytest.raises(NeverFits) as caught:
        await sched.acquire("alice", 1, req())
    message = str(caught.value)
    assert f"{size_gb:.1f} GB" in message and f"{max(memories_gb):.1f} GB" in message
    assert "memory_gb" in message
    assert sched.waiting_count() == 0


async def test_a_loaded_model_routes_even_if_memory_gb_says_it_cannot_fit() -> None:
    targets = FakeTargets()
    targets.add(make_view(1, size_bytes=2 * GB, memory_bytes=1 * GB))  # loaded: it fits
    sched = Scheduler(targets, PrefixIndex(), FakeClock(), queue_wait_s=BOUND_S)
    lease = await sched.acquire("alice", 1, req())
    lease.release(ok())
