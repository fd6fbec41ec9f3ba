"""Registration, stable IDs, aliases and the staleness rule."""

from __future__ import annotations

from pharos.engine.types import Kind, Load, Residency
from pharos.state import StateOptions
from tests.state.fakes import URL, URL_B, make_state, snap, spec

LOADED = Residency.LOADED
COLD = Residency.COLD


async def test_targets_registered_on_first_sight_with_stable_ids() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"a": LOADED, "b": COLD})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    ids = {view.model: view.target_id for view in h.state.targets_of_backend(URL, h.clock.now())}
    assert set(ids) == {"a", "b"}
    assert h.state.target_id_of(f"{URL} a") == ids["a"]
    assert h.state.key_of(ids["b"]) == f"{URL} b"

    h.engine.snapshots[URL] = snap(models={"b": LOADED, "c": LOADED})
    for _ in range(5):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    views = h.state.targets_of_backend(URL, h.clock.now())
    by_model = {view.model: view.target_id for view in views}
    assert by_model["a"] == ids["a"]  # never removed
    assert by_model["b"] == ids["b"]
    assert by_model["c"] not in ids.values()
    assert [v.model for v in h.state.targets_for_model("a", h.clock.now())] == []
    assert h.state.model_listed("a")
    assert not h.state.model_listed("zzz")
    assert h.state.target(ids["a"], h.clock.now()) is not None
    assert h.state.target(999, h.clock.now()) is None


async def test_single_model_engine_gets_one_target() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"qwen": Residency.UNKNOWN}, loads={"": Load(running=2)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    (view,) = h.state.targets_for_model("qwen", h.clock.now())
    assert view.running == 2  # the whole-backend load is the one target's
    assert view.residency is Residency.UNKNOWN
    assert view.kind is Kind.VLLM
    assert view.up


async def test_aliases_rename_models_and_keep_served_name() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(
        models={"qwen2.5:3b-instruct-q4_K_M": LOADED},
        loads={"qwen2.5:3b-instruct-q4_K_M": Load(running=1)},
    )
    h.state.set_backends([spec(aliases={"qwen2.5:3b-instruct-q4_K_M": "qwen"})])
    await h.state.run_round(URL)
    (view,) = h.state.targets_for_model("qwen", h.clock.now())
    assert view.model == "qwen"
    assert view.served_model == "qwen2.5:3b-instruct-q4_K_M"
    assert view.key == f"{URL} qwen"
    assert view.running == 1
    assert h.state.targets_for_model("qwen2.5:3b-instruct-q4_K_M", h.clock.now()) == []


async def test_load_signals_go_stale_after_three_fast_intervals() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(
        models={"m": LOADED}, loads={"m": Load(running=0, waiting=0, capacity=4, kv_usage=0.5)}
    )
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    start = h.clock.now()
    (view,) = h.state.targets_for_model("m", start)
    assert view.running == 0  # zero is a known value, not unknown
    assert view.waiting == 0
    assert view.kv_usage == 0.5
    assert view.capacity == 4

    (view,) = h.state.targets_for_model("m", start + 3.0)
    assert view.running == 0
    (view,) = h.state.targets_for_model("m", start + 3.01)
    assert view.running is None
    assert view.waiting is None
    assert view.kv_usage is None
    assert view.capacity == 4  # read by the full interval: 15 s
    assert view.residency is LOADED
    assert view.up

    (view,) = h.state.targets_for_model("m", start + 15.01)
    assert view.capacity is None
    assert view.residency is Residency.UNKNOWN
    assert not view.up


async def test_fast_rounds_keep_load_fresh_while_full_signals_age() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=1, capacity=4)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)  # resolve: a full read
    h.engine.snapshots[URL] = snap(models={"m": COLD}, loads={"m": Load(running=3, capacity=8)})
    for _ in range(4):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    assert [kind for _, kind in h.engine.calls] == ["resolve", "fast", "fast", "fast", "fast"]
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.running == 3
    assert view.capacity == 4  # capacity comes from full rounds only
    assert view.residency is LOADED
    assert view.last_fast_scrape_at == h.clock.now()
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert h.engine.calls[-1] == (URL, "full")
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.capacity == 8
    assert view.residency is COLD


async def test_configurable_intervals() -> None:
    h = make_state(StateOptions(fast_interval_s=2.0, full_interval_s=4.0, stale_factor=2.0))
    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=1)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    for _ in range(2):
        await h.state.run_round(URL)
    assert [kind for _, kind in h.engine.calls] == ["resolve", "fast", "full"]
    (view,) = h.state.targets_for_model("m", h.clock.now() + 4.01)
    assert view.running is None
    assert view.up


async def test_config_capacity_and_memory_pass_through() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.state.set_backends([spec(capacity=3, memory_bytes=24 << 30)])
    await h.state.run_round(URL)
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.capacity is None
    assert view.config_capacity == 3
    assert view.memory_bytes == 24 << 30


async def test_models_of_two_backends() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.engine.snapshots[URL_B] = snap(models={"m": COLD})
    h.state.set_backends([spec(), spec(URL_B)])
    await h.state.run_round(URL)
    await h.state.run_round(URL_B)
    views = h.state.targets_for_model("m", h.clock.now())
    assert {view.backend_url for view in views} == {URL, URL_B}
    assert len({view.target_id for view in views}) == 2
    assert len(h.state.all_targets(h.clock.now())) == 2
