"""Within a key, the smallest prompt waiting for a model gets the next slot (issue 15).

One key shared by many users (one Open WebUI, `make scenario`'s client) queued a short
follow-up behind a long first turn; across keys the turn order is unchanged.
"""

from __future__ import annotations

import asyncio

import pytest

from pharos.clock import FakeClock
from pharos.sched import Lease, RouteRequest, Scheduler
from pharos.sched.fairqueue import SJF_AGE_S
from tests.sched.fakes import FakeTargets, make_view, ok


async def queue(
    sched: Scheduler, key: str, prompt_tokens: int, seed: int, retry: bool = False
) -> asyncio.Future[Lease]:
    waiter = asyncio.ensure_future(
        sched.acquire(key, 1, RouteRequest("m", prompt_tokens, None, seed, retry=retry))
    )
    await asyncio.sleep(0)
    return waiter


async def granted_order(
    holder: Lease, waiters: list[asyncio.Future[Lease]], clock: FakeClock
) -> list[int]:
    """Release the one slot and each grant in turn; the prompt sizes in grant order."""
    order: list[int] = []
    held = holder
    for _ in waiters:
        clock.advance(0.5)
        held.release(ok())
        await asyncio.sleep(0)
        done = [w for w in waiters if w.done() and w.result().request.prompt_tokens not in order]
        assert len(done) == 1
        held = done[0].result()
        order.append(held.request.prompt_tokens)
    return order


# the queued requests as (key, prompt tokens, retry, seconds before the next one): grant order
CASES = [
    ([("k", 2000, False, 0.1), ("k", 300, False, 0.1)], [300, 2000]),  # one key: smaller first
    ([("a", 2000, False, 0.1), ("b", 300, False, 0.1)], [2000, 300]),  # keys keep their turns
    ([("k", 300, False, 0.1), ("k", 2000, True, 0.1)], [2000, 300]),  # a retry goes first
    ([("k", 2000, False, SJF_AGE_S), ("k", 300, False, 0.1)], [2000, 300]),  # aged: arrival
    ([("k", 900, False, 0.1), ("k", 2000, False, 0.1), ("k", 300, False, 0.1)], [300, 900, 2000]),
]


@pytest.mark.parametrize(("queued", "order"), CASES)
async def test_the_smallest_prompt_of_a_key_goes_first_unless_retried_or_aged(
    sched: Scheduler,
    targets: FakeTargets,
    clock: FakeClock,
    queued: list[tuple[str, int, bool, float]],
    order: list[int],
) -> None:
    targets.add(make_view(1, capacity=1))
    holder = await sched.acquire("holder", 1, RouteRequest("m", 100, None, 0))
    waiters = []
    for seed, (key, prompt_tokens, retry, gap_s) in enumerate(queued, start=1):
        waiters.append(await queue(sched, key, prompt_tokens, seed, retry))
        clock.advance(gap_s)
    assert sched.waiting_count() == len(queued)
    assert await granted_order(holder, waiters, clock) == order
