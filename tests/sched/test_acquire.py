"""Admission: candidates from target views, occupancy, capacity, memory, failures (spec §8)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pharos.clock import FakeClock
from pharos.engine.types import Residency
from pharos.sched import (
    Gauges,
    QueueFull,
    RouteRequest,
    Scheduler,
    Unavailable,
    UnknownModel,
)
from tests.sched.fakes import GB, FakeTargets, make_view, ok


def req(model: str = "m", seed: int = 0, **kw: object) -> RouteRequest:
    return RouteRequest(model=model, prompt_tokens=1000, chain=None, seed=seed, **kw)  # type: ignore[arg-type]


async def test_immediate_lease_on_a_free_target(sched: Scheduler, targets: FakeTargets):
    targets.add(make_view(1))
    lease = await sched.acquire("k", 1, req())
    assert lease.target.target_id == 1
    assert lease.queue_outcome == "immediate"
    assert lease.queue_wait_s == 0.0
    assert lease.route_outcome == "only_choice"
    assert lease.predicted is None
    assert sched.inflight(1) == 1
    lease.release(ok())
    assert sched.inflight(1) == 0


async def test_unknown_model_when_no_backend_ever_listed_it(sched: Scheduler):
    with pytest.raises(UnknownModel) as info:
        await sched.acquire("k", 1, req("nope"))
    assert info.value.outcome == "unknown_model"


@pytest.mark.parametrize("change", [{"up": False}, {"draining": True}], ids=["down", "draining"])
async def test_unavailable_when_no_up_backend_serves_it(
    sched: Scheduler, targets: FakeTargets, change: dict[str, Any]
):
    targets.add(make_view(1, **change))
    with pytest.raises(Unavailable) as info:
        await sched.acquire("k", 1, req())
    assert info.value.outcome == "unavailable"
    assert sched.waiting_count() == 0


async def test_excluded_targets_are_not_candidates(sched: Scheduler, targets: FakeTargets):
    targets.add(make_view(1))
    targets.add(make_view(2, capacity=1, running=0))
    lease = await sched.acquire("k", 1, req(exclude_target_ids=frozenset({1})))
    assert lease.target.target_id == 2
    with pytest.raises(Unavailable):
        await sched.acquire("k", 1, req(exclude_target_ids=frozenset({1, 2})))


@pytest.mark.parametrize(
    ("engine_capacity", "config_capacity", "waiting", "slots"),
    [
        (3, 1, None, 3),  # the engine's count wins
        (None, 1, None, 1),  # then config
        (None, None, None, 2),  # then the default
        (None, None, 0, 2),
        (None, None, 1, 0),  # unknown capacity and the engine queues: saturated
        (1, None, 4, 1),  # a known capacity is not overridden by waiting
    ],
)
async def test_capacity_sources(
    new_sched: Callable[..., Scheduler],
    targets: FakeTargets,
    engine_capacity: int | None,
    config_capacity: int | None,
    waiting: int | None,
    slots: int,
):
    sched = new_sched(default_capacity=2)
    targets.add(
        make_view(1, capacity=engine_capacity, config_capacity=config_capacity, waiting=waiting)
    )
    granted = []
    for i in range(4):
        task = asyncio.ensure_future(sched.acquire("k", 1, req(seed=i)))
        await asyncio.sleep(0)
        if task.done():
            granted.append(task.result())
        else:
            task.cancel()
            await asyncio.sleep(0)
    assert len(granted) == slots
    assert sched.waiting_count() == 0


async def test_engine_running_counts_clients_that_bypass_us(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
):
    targets.add(make_view(1, capacity=2, running=1, last_fast_scrape_at=clock.now()))
    first = await sched.acquire("k", 1, req())  # beside one request that bypasses us
    clock.advance(0.5)
    targets.update(1, running=2, last_fast_scrape_at=clock.now())  # sees `first`
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    targets.update(1, running=1)
    sched.kick()  # a scrape round saw a slot free
    await asyncio.sleep(0)
    assert task.done()
    assert task.result().queue_outcome == "waited"
    assert task.result().queue_wait_s == 0.0  # no clock time passed
    assert sched.inflight(1) == 2
    first.release(ok())


async def test_a_reply_ending_after_the_fast_scrape_makes_the_local_count_win(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
):
    targets.add(make_view(1, capacity=1, running=0, last_fast_scrape_at=clock.now()))
    first = await sched.acquire("k", 1, req())
    clock.advance(0.5)
    targets.update(1, running=1, waiting=0, last_fast_scrape_at=clock.now())  # sees `first`
    clock.advance(0.2)
    first.release(ok())  # the engine's Running still holds this slot until the next scrape
    second = await asyncio.wait_for(sched.acquire("k", 1, req()), timeout=1)
    assert second.target.target_id == 1
    second.release(ok())
    clock.advance(0.3)
    # a bypassing client now, and another of its requests in the engine's queue
    targets.update(1, running=1, waiting=1, last_fast_scrape_at=clock.now())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()  # the fresh scrape counts again
    task.cancel()


async def test_peers_inflight_is_counted_until_they_go_silent(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
):
    view = targets.add(make_view(1, capacity=2))
    sched.merge(7, Gauges(inflight={view.key: 2}, seq=1))
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    assert sched.inflight_cluster(1, view.key) == 2
    clock.advance(2.1)  # the peer went silent for more than 2 s
    sched.kick()
    await asyncio.sleep(0)
    assert task.done()
    assert sched.inflight(1) == 1


async def test_a_peers_freed_slot_serves_our_waiter(sched: Scheduler, targets: FakeTargets):
    view = targets.add(make_view(1, capacity=1))
    sched.merge(7, Gauges(inflight={view.key: 1}, seq=1))
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    sched.merge(7, Gauges(inflight={}, seq=2))
    await asyncio.sleep(0)
    assert task.done()


async def test_forget_drops_a_leaving_peer_at_once(sched: Scheduler, targets: FakeTargets):
    view = targets.add(make_view(1, capacity=1))
    sched.merge(7, Gauges(inflight={view.key: 1}, seq=1))
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert not task.done()
    sched.forget(7)
    await asyncio.sleep(0)
    assert task.done()


async def test_export_reports_inflight_per_key_and_waiters_per_model(
    sched: Scheduler, targets: FakeTargets
):
    view = targets.add(make_view(1, capacity=1))
    lease = await sched.acquire("k", 1, req())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    first = sched.export()
    assert first.inflight == {view.key: 1}
    assert first.waiting == {"m": 1}
    assert sched.export().seq > first.seq
    lease.release(ok())
    await asyncio.sleep(0)
    assert sched.export().waiting == {}
    task.result().release(ok())
    assert sched.export().inflight == {}


async def test_queue_limit(new_sched: Callable[..., Scheduler], targets: FakeTargets):
    sched = new_sched(queue_limit=2)
    targets.add(make_view(1, capacity=1))
    await sched.acquire("k", 1, req())
    waiting = [asyncio.ensure_future(sched.acquire("k", 1, req())) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(QueueFull) as info:
        await sched.acquire("k", 1, req())
    assert info.value.outcome == "queue_full"
    for task in waiting:
        task.cancel()


async def test_cancelled_waiter_leaves_the_queue(sched: Scheduler, targets: FakeTargets):
    targets.add(make_view(1, capacity=1))
    lease = await sched.acquire("k", 1, req())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    assert sched.waiting_count() == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sched.waiting_count() == 0
    lease.release(ok())
    assert sched.inflight(1) == 0


async def test_a_slot_granted_to_a_cancelled_waiter_is_given_back(
    sched: Scheduler, targets: FakeTargets
):
    targets.add(make_view(1, capacity=1))
    lease = await sched.acquire("k", 1, req())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    lease.release(ok())  # grants the slot to the waiter...
    assert sched.inflight(1) == 1
    task.cancel()  # ...which is cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sched.inflight(1) == 0
    assert sched.waiting_count() == 0


async def test_a_waiter_fails_when_its_backends_go_down(sched: Scheduler, targets: FakeTargets):
    targets.add(make_view(1, capacity=1))
    await sched.acquire("k", 1, req())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    targets.update(1, up=False)
    sched.kick()
    with pytest.raises(Unavailable):
        await task
    assert sched.waiting_count() == 0


async def test_cold_load_that_would_evict_a_busy_model_waits_until_it_is_evictable(
    sched: Scheduler, targets: FakeTargets
):
    url = "http://gpu"
    targets.add(make_view(1, model="big", backend=url, vram_bytes=8 * GB, memory_bytes=10 * GB))
    targets.add(
        make_view(
            2,
            model="other",
            backend=url,
            residency=Residency.COLD,
            size_bytes=4 * GB,
            memory_bytes=10 * GB,
        )
    )
    busy = await sched.acquire("k", 1, req("big"))
    task = asyncio.ensure_future(sched.acquire("k", 1, req("other")))
    await asyncio.sleep(0)
    assert not task.done()  # 4 GB does not fit beside 8 GB in use on a 10 GB host
    busy.release(ok())  # "big" is now loaded but idle: evictable
    await asyncio.sleep(0)
    assert task.done()
    lease = task.result()
    assert lease.target.target_id == 2
    assert lease.candidate.fits_if_cold is True
    assert lease.queue_outcome == "waited"


@pytest.mark.parametrize(
    ("memory", "size", "busy_vram", "fits"),
    [
        (None, 4 * GB, 8 * GB, None),  # unknown memory: feasible
        (10 * GB, None, 8 * GB, None),  # unknown size: feasible
        (10 * GB, 4 * GB, None, None),  # a busy model of unknown size: feasible
        (16 * GB, 4 * GB, 8 * GB, True),
    ],
)
async def test_fits_if_cold_is_unknown_when_sizes_are(
    sched: Scheduler,
    targets: FakeTargets,
    memory: int | None,
    size: int | None,
    busy_vram: int | None,
    fits: bool | None,
):
    url = "http://gpu"
    targets.add(make_view(1, model="big", backend=url, vram_bytes=busy_vram))
    targets.add(
        make_view(
            2,
            model="other",
            backend=url,
            residency=Residency.COLD,
            size_bytes=size,
            memory_bytes=memory,
        )
    )
    await sched.acquire("k", 1, req("big"))
    lease = await sched.acquire("k", 1, req("other"))
    assert lease.candidate.fits_if_cold is fits
    assert lease.dispatch.value == "cold"


async def test_requests_in_flight_on_a_cold_target_mean_it_is_loading(
    sched: Scheduler, targets: FakeTargets
):
    targets.add(make_view(1, residency=Residency.COLD, capacity=4))
    first = await sched.acquire("k", 1, req())
    assert first.candidate.loading is False
    second = await sched.acquire("k", 1, req())
    assert second.candidate.loading is True
    assert second.decision.scores[0].load_s == 0.0  # the load is paid already
    targets.update(1, residency=Residency.LOADING)
    first.release(ok())
    second.release(ok())
    third = await sched.acquire("k", 1, req())
    assert third.candidate.loading is True


async def test_unknown_policy_is_a_clear_error(targets: FakeTargets, clock: FakeClock, index):
    with pytest.raises(ValueError, match="policy"):
        Scheduler(targets, index, clock, policy="fastest")


async def test_least_load_policy_is_selectable(new_sched, targets: FakeTargets):
    sched = new_sched(policy="least-load")
    targets.add(make_view(1, capacity=4))
    targets.add(make_view(2, capacity=4))
    a = await sched.acquire("k", 1, req(seed=0))
    b = await sched.acquire("k", 1, req(seed=0))
    assert {a.target.target_id, b.target.target_id} == {1, 2}
    assert a.route_outcome == "least_loaded"


async def test_queue_wait_is_measured_on_the_injected_clock(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
):
    targets.add(make_view(1, capacity=1))
    lease = await sched.acquire("k", 1, req())
    task = asyncio.ensure_future(sched.acquire("k", 1, req()))
    await asyncio.sleep(0)
    clock.advance(1.5)
    lease.release(ok())
    await asyncio.sleep(0)
    assert task.result().queue_wait_s == 1.5
    assert task.result().queue_outcome == "waited"


async def test_a_new_request_does_not_overtake_waiters_for_an_engine_freed_slot(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock
):
    targets.add(make_view(1, capacity=1, running=1, last_fast_scrape_at=clock.now()))
    waiter = asyncio.ensure_future(sched.acquire("k", 1, req(seed=1)))
    await asyncio.sleep(0)
    targets.update(1, running=0)  # the engine's slot freed; no kick yet
    newcomer = asyncio.ensure_future(sched.acquire("k", 1, req(seed=2)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert waiter.done() and not newcomer.done()
    newcomer.cancel()
    await asyncio.sleep(0)
