"""A loaded model none of our replies used for IDLE_MODEL_STALE_S holds no memory a second
replica needs (issue 15, cold-burst-heavy): the burst's model, idle after its one turn, must
not keep a chat model on one host for the rest of the run."""

from __future__ import annotations

import asyncio

import pytest

from pharos.clock import FakeClock
from pharos.engine.types import Residency
from pharos.sched import RouteRequest, Scheduler
from pharos.sched.fits import IDLE_MODEL_STALE_S
from pharos.state.view import TargetView
from tests.sched.fakes import GB, FakeTargets, candidates_with_fits, ok
from tests.sched.test_placement import ollama_view

NOW = 1000.0


def evicts_loaded_with(
    last_reply_end: dict[int, float], local: dict[int, int], c_gb: int = 4
) -> bool:
    """Whether loading c on a 9 GB host that holds a and b (4 GB each) unloads a model."""
    views: list[TargetView] = [
        ollama_view(1, "a", Residency.LOADED),
        ollama_view(2, "b", Residency.LOADED),
        ollama_view(3, "c", Residency.COLD, size_bytes=c_gb * GB),
    ]
    candidates = candidates_with_fits(views, last_reply_end, local, NOW)
    (cold,) = [c for c in candidates if c.target_id == 3]
    assert cold.fits_if_cold is True
    return cold.evicts_loaded


@pytest.mark.parametrize(
    ("last_reply_end", "local", "c_gb", "evicts"),
    [
        # a serving (1 in flight), b's last reply ended ...
        ({2: NOW - IDLE_MODEL_STALE_S - 1}, {1: 1}, 4, False),  # ... before the bound: free
        ({2: NOW - IDLE_MODEL_STALE_S + 1}, {1: 1}, 4, True),  # ... within it: an unload
        ({}, {1: 1}, 4, True),  # ... never (loaded by someone else): unknown is not stale
        # both idle, a stale and b recent: a 4 GB c fits where a was, a 6 GB one unloads b too
        ({1: NOW - 600.0, 2: NOW - 1.0}, {}, 4, False),
        ({1: NOW - 600.0, 2: NOW - 1.0}, {}, 6, True),
        # both idle and stale: even a 6 GB c unloads only stale models
        ({1: NOW - 600.0, 2: NOW - 300.0}, {}, 6, False),
    ],
)
def test_an_idle_model_unused_for_the_stale_bound_is_not_counted_as_an_unload(
    last_reply_end: dict[int, float], local: dict[int, int], c_gb: int, evicts: bool
) -> None:
    assert evicts_loaded_with(last_reply_end, local, c_gb) is evicts


def route(model: str) -> RouteRequest:
    return RouteRequest(model=model, prompt_tokens=1000, chain=None, seed=0)


async def serve_c_once_on_o1(sched: Scheduler, targets: FakeTargets) -> None:
    """o0 holds a (2 slots); o1 holds b and c, each 4 of its 9 GB, and a is cold there."""
    targets.add(ollama_view(1, "a", Residency.LOADED))
    targets.add(ollama_view(2, "b", Residency.LOADED, backend_url="http://o1"))
    targets.add(ollama_view(4, "c", Residency.LOADED, backend_url="http://o1"))
    targets.add(ollama_view(3, "a", Residency.COLD, backend_url="http://o1"))
    (await sched.acquire("burst", 1, route("c"))).release(ok())


@pytest.mark.parametrize(
    ("idle_s", "third_on"),
    [
        (IDLE_MODEL_STALE_S + 1, 3),  # c stale: a second replica of a on o1 (c unloads)
        (IDLE_MODEL_STALE_S - 1, None),  # c used lately: the third request queues on o0
    ],
)
async def test_a_request_that_would_queue_loads_a_replica_over_a_model_idle_past_the_bound(
    sched: Scheduler, targets: FakeTargets, clock: FakeClock, idle_s: float, third_on: int | None
) -> None:
    await serve_c_once_on_o1(sched, targets)
    clock.advance(idle_s)
    held = [await sched.acquire("k", 1, route("a")) for _ in range(2)]
    assert [lease.target.target_id for lease in held] == [1, 1]
    third = asyncio.create_task(sched.acquire("k", 1, route("a")))
    await asyncio.sleep(0)
    assert third.done() is (third_on is not None)  # else waiting in the fair queue for o0
    if third_on is None:
        held[0].release(ok())
        assert (await third).target.target_id == 1
    else:
        lease = third.result()
        assert lease.target.target_id == third_on
        assert lease.decision.explain().startswith("a second replica")
