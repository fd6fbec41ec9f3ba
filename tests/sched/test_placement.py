"""Which cold loads unload an idle model (issue 15): the candidate says so, so the policy
loads a second replica only where the host has room, and prices an unload."""

from __future__ import annotations

from pharos.engine.types import Kind, Residency
from pharos.sched.candidates import FitsIfCold, build_candidates
from pharos.state.view import TargetView
from tests.sched.fakes import GB, make_view

HOST = "http://o0"


def ollama_view(target_id: int, model: str, residency: Residency, **kw: object) -> TargetView:
    fields: dict[str, object] = {
        "kind": Kind.OLLAMA,
        "residency": residency,
        "capacity": None,
        "config_capacity": 2,
        "size_bytes": 4 * GB,
        "memory_bytes": 9 * GB,
    }
    fields.update(kw)
    return make_view(target_id, model, HOST, **fields)


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
