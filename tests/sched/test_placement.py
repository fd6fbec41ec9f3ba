"""Which cold loads unload an idle model (issue 15): the candidate says so, so the policy
loads a second replica only where the host has room, and prices an unload."""

from __future__ import annotations

import asyncio

from pharos.engine.types import Kind, Residency
from pharos.sched import RouteRequest, Scheduler
from pharos.sched.candidates import build_candidates
from pharos.sched.fits import FitsIfCold
from pharos.state.view import TargetView
from tests.sched.fakes import GB, FakeTargets, make_view, ok

HOST = "http://o0"


def ollama_view(
    target_id: int, model: str, residency: Residency, backend_url: str = HOST, **kw: object
) -> TargetView:
    fields: dict[str, object] = {
        "kind": Kind.OLLAMA,
        "residency": residency,
        "capacity": None,
        "config_capacity": 2,
        "size_bytes": 4 * GB,
        "memory_bytes": 9 * GB,
    }
    fields.update(kw)
    return make_view(target_id, model, backend_url, **fields)


def evicts_loaded_of(views: list[TargetView], local: dict[int, int]) -> dict[int, bool]:
    fits_of = FitsIfCold(
        lambda url, _now: [v for v in views if v.backend_url == url],
        0.0,
        local_inflight=local,
        peer_inflight={},
        last_reply_end={},
    )
    candidates, _ = build_candidates(
        views,
        local_inflight=local,
        peer_inflight={},
        last_reply_end={},
        router_waiting=0,
        matches={},
        default_capacity=2,
        fits_of=fits_of,
        free_fit_of=fits_of,
    )
    return {c.target_id: c.evicts_loaded for c in candidates if c.warm is False}


def test_a_cold_load_on_a_full_host_says_it_unloads_an_idle_model() -> None:
    # 9 GB host, 4 GB models: a and b loaded, c cold. Loading c means unloading a or b.
    views = [
        ollama_view(1, "a", Residency.LOADED),
        ollama_view(2, "b", Residency.LOADED),
        ollama_view(3, "c", Residency.COLD),
    ]
    assert evicts_loaded_of(views, {}) == {3: True}


def test_a_cold_load_beside_one_loaded_model_unloads_nothing() -> None:
    views = [ollama_view(1, "a", Residency.LOADED), ollama_view(3, "c", Residency.COLD)]
    assert evicts_loaded_of(views, {}) == {3: False}


def test_a_load_that_must_wait_for_a_busy_model_is_infeasible_not_an_unload() -> None:
    # a and b both serving: c fits nowhere until one is idle (fits_if_cold False)
    views = [
        ollama_view(1, "a", Residency.LOADED),
        ollama_view(2, "b", Residency.LOADED),
        ollama_view(3, "c", Residency.COLD),
    ]
    assert evicts_loaded_of(views, {1: 1, 2: 1}) == {3: False}


def test_unknown_host_memory_never_counts_as_an_unload() -> None:
    views = [
        ollama_view(1, "a", Residency.LOADED, memory_bytes=None),
        ollama_view(3, "c", Residency.COLD, memory_bytes=None),
    ]
    assert evicts_loaded_of(views, {}) == {3: False}


def route(model: str) -> RouteRequest:
    return RouteRequest(model=model, prompt_tokens=1000, chain=None, seed=0)


async def test_a_third_request_on_a_full_host_loads_the_model_where_another_host_has_room(
    sched: Scheduler, targets: FakeTargets
) -> None:
    # o0 holds a (2 slots); o1 holds b, and a fits beside it (4 + 4 of 9 GB)
    targets.add(ollama_view(1, "a", Residency.LOADED))
    targets.add(ollama_view(2, "b", Residency.LOADED, backend_url="http://o1"))
    targets.add(ollama_view(3, "a", Residency.COLD, backend_url="http://o1"))
    held = [await sched.acquire("k", 1, route("a")) for _ in range(2)]
    third = await asyncio.wait_for(sched.acquire("k", 1, route("a")), 5.0)  # queued: fails
    assert [lease.target.target_id for lease in [*held, third]] == [1, 1, 3]
    assert third.decision.explain().startswith("a second replica")


async def test_no_second_replica_where_it_would_unload_the_other_hosts_model(
    sched: Scheduler, targets: FakeTargets
) -> None:
    # o1 holds b and c (idle): loading a there unloads one, so the third request queues on o0
    targets.add(ollama_view(1, "a", Residency.LOADED))
    targets.add(ollama_view(2, "b", Residency.LOADED, backend_url="http://o1"))
    targets.add(ollama_view(4, "c", Residency.LOADED, backend_url="http://o1"))
    targets.add(ollama_view(3, "a", Residency.COLD, backend_url="http://o1"))
    held = [await sched.acquire("k", 1, route("a")) for _ in range(2)]
    third = asyncio.create_task(sched.acquire("k", 1, route("a")))
    await asyncio.sleep(0)
    assert not third.done()  # waiting in the fair queue
    held[0].release(ok())
    assert (await third).target.target_id == 1
