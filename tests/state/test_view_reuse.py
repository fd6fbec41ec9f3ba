"""State reuses a target's view until the target changes: never a different view than a fresh
build (derive.target_view) would give, whatever is written and whenever it is read."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.engine.types import Load, ModelInfo, Residency, Snapshot
from pharos.state import State, StateOptions, StatRecord, TargetView
from pharos.state.derive import target_view
from pharos.state.records import BackendRuntime, Observed, TargetRecord
from pharos.state.stats import TargetStats
from pharos.state.views import ViewCache, last_fresh_at
from tests.state.fakes import URL, URL_B, make_state, snap, spec

LOADED = Residency.LOADED
OPTIONS = StateOptions(fast_interval_s=0.1, full_interval_s=0.3, scrape_timeout_s=0.05)

times = st.floats(min_value=0.0, max_value=2.0e6, allow_nan=False)
bounds = st.floats(min_value=1e-9, max_value=1.0e4, allow_nan=False)


@given(at=times, bound_s=bounds)
def test_the_last_fresh_instant_is_the_last_float_the_freshness_test_accepts(
    at: float, bound_s: float
) -> None:
    last = last_fresh_at(at, bound_s, at)
    assert last - at <= bound_s
    assert not math.nextafter(last, math.inf) - at <= bound_s


def test_a_test_that_already_failed_or_has_no_round_never_ends_a_view() -> None:
    assert last_fresh_at(None, 1.0, 5.0) == math.inf
    assert last_fresh_at(1.0, 1.0, 2.5) == math.inf  # stale at build: stale from then on


def _snapshot(draw_running: int | None, residency: Residency) -> Snapshot:
    return Snapshot(
        version="1",
        models=MappingProxyType({"m": ModelInfo(state=residency, size_bytes=10)}),
        loads=MappingProxyType({"m": Load(running=draw_running, waiting=0, kv_usage=0.5)}),
    )


# Each step writes one thing a view is built from, the way State's writers do, or moves `now`.
# (step, argument)
steps = st.one_of(
    st.tuples(st.just("now"), st.floats(min_value=-1.0, max_value=3.0, allow_nan=False)),
    st.tuples(st.just("full"), st.floats(min_value=0.0, max_value=1.0)),
    st.tuples(st.just("fast"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("busy"), st.booleans()),
    st.tuples(st.just("eject"), st.booleans()),
    st.tuples(st.just("drain"), st.booleans()),
    st.tuples(st.just("log"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("reply"), st.floats(min_value=0.0, max_value=1.0)),
    st.tuples(st.just("stats"), st.floats(min_value=0.001, max_value=1.0)),
    st.tuples(st.just("generation"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("restored"), st.floats(min_value=0.001, max_value=1.0)),
    st.tuples(st.just("new_backend"), st.booleans()),
    st.tuples(st.just("served_model"), st.booleans()),
    st.tuples(st.just("prefill"), st.floats(min_value=0.0, max_value=1.0)),
)


@settings(max_examples=300)
@given(script=st.lists(steps, min_size=1, max_size=40))
def test_a_reused_view_equals_a_fresh_build_after_any_writes_at_any_time(
    script: list[tuple[str, object]],
) -> None:
    cache = ViewCache(OPTIONS)
    backend = BackendRuntime(spec=spec())
    record = TargetRecord(target_id=1, key=f"{URL} m", backend_url=URL, model="m", served_model="m")
    restored: TargetStats | None = None
    now = 10.0
    for step, arg in script:
        if step == "now":
            assert isinstance(arg, float)
            now += arg
        elif step == "full":
            assert isinstance(arg, float)
            at = now - arg
            full = _snapshot(1, LOADED if arg < 0.5 else Residency.COLD)
            backend.observed = Observed(
                full=full, full_at=at, fast=full, fast_at=at, listed=frozenset({"m"})
            )
        elif step == "fast":
            assert isinstance(arg, int)
            backend.observed = Observed(
                full=backend.observed.full,
                full_at=backend.observed.full_at,
                fast=_snapshot(arg, LOADED),
                fast_at=now,
                listed=backend.observed.listed,
            )
        elif step == "busy":
            backend.busy_silent_at = now if arg else None
        elif step == "eject":
            backend.ejected = "refused" if arg else None
        elif step == "drain":
            backend.draining = bool(arg)
        elif step == "log":
            assert isinstance(arg, int)
            backend.log_snapshot = Snapshot(loads=MappingProxyType({"": Load(capacity=arg)}))
        elif step == "reply":
            assert isinstance(arg, float)
            record.reply_loaded_at = now - arg
        elif step == "stats":
            assert isinstance(arg, float)
            record.stats = record.stats.observed(service_s=arg)
        elif step == "generation":
            assert isinstance(arg, int)
            record.generation += arg
        elif step == "restored":
            assert isinstance(arg, float)
            restored = TargetStats(prefill_s_per_token=arg, load_s=arg)
        elif step == "new_backend":  # set_backends with a changed spec: a new runtime
            backend = BackendRuntime(spec=spec(capacity=2 if arg else None))
        elif step == "served_model":  # the registry's rename of the engine's own name
            record.served_model = "m-served" if arg else "m"
        elif step == "prefill":  # a reply's every sample, as Scheduler._learn observes them
            assert isinstance(arg, float)
            record.stats = record.stats.observed(
                prefill_s_per_token=arg / 1000, load_s=arg * 3, service_s=arg + 1
            )
            record.reply_loaded_at = now
            record.last_residency = LOADED
        assert cache.view(record, backend, restored, now) == target_view(
            record, backend, OPTIONS, now, restored
        )


async def test_an_acquire_with_nothing_changed_gets_the_views_already_built() -> None:
    h = make_state(OPTIONS)
    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=1)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    (first,) = h.state.targets_for_model("m", h.clock.now())
    h.clock.advance(0.05)
    (again,) = h.state.targets_for_model("m", h.clock.now())
    assert again is first


async def test_a_round_a_reply_or_time_past_the_staleness_bound_builds_a_new_view() -> None:
    h = make_state(OPTIONS)
    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=1)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    (built,) = h.state.targets_for_model("m", h.clock.now())

    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=2)})
    await h.state.run_round(URL)
    (after_round,) = h.state.targets_for_model("m", h.clock.now())
    assert after_round is not built
    assert after_round.running == 2

    h.state.observe(after_round.target_id, service_s=2.0)
    (after_reply,) = h.state.targets_for_model("m", h.clock.now())
    assert after_reply.service_s == 2.0

    h.clock.advance(OPTIONS.stale_factor * OPTIONS.fast_interval_s + 0.01)  # load signals stale
    (stale,) = h.state.targets_for_model("m", h.clock.now())
    assert stale.running is None
    assert stale.service_s == 2.0


def _uncached(state: State, options: StateOptions, model: str, now: float) -> list[TargetView]:
    """targets_for_model as it was before views were reused: every view derived afresh."""
    registry = state._registry  # the reference reads State's own records, uncached
    views = []
    for target_id in registry.ids_of_model(model):
        record = registry.get(target_id)
        assert record is not None
        url = record.backend_url
        backend = state._backends.get(url) or state._removed.get(url)
        if backend is None or target_id not in backend.target_ids:
            continue
        if model not in backend.observed.listed:
            continue
        views.append(target_view(record, backend, options, now, registry.restored_for(record.key)))
    return views


def _uncached_of_backend(
    state: State, options: StateOptions, url: str, now: float
) -> list[TargetView]:
    """targets_of_backend as it was before views were reused."""
    registry = state._registry
    backend = state._backends.get(url) or state._removed.get(url)
    if backend is None:
        return []
    views = []
    for target_id in backend.target_ids:
        record = registry.get(target_id)
        assert record is not None
        views.append(target_view(record, backend, options, now, registry.restored_for(record.key)))
    return views


# What a pharos serve's State goes through, one step at a time: (step, argument)
state_steps = st.one_of(
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.01, 0.1, 0.29, 0.31, 0.9, 1.0])),
    st.tuples(st.just("round"), st.sampled_from([URL, URL_B])),
    st.tuples(st.just("engine"), st.tuples(st.sampled_from([URL, URL_B]), st.integers(0, 5))),
    st.tuples(st.just("down"), st.sampled_from([URL, URL_B])),
    st.tuples(st.just("silent"), st.sampled_from([URL, URL_B])),
    st.tuples(st.just("eject"), st.sampled_from([URL, URL_B])),
    st.tuples(st.just("reply"), st.integers(1, 4)),
    st.tuples(st.just("restore"), st.floats(0.001, 1.0)),
    st.tuples(st.just("backends"), st.sampled_from(["a", "b", "ab", "a2"])),
    st.tuples(st.just("inflight"), st.integers(1, 4)),
)

ENGINE_STATES = [  # what a backend's next round reads, by number
    ({"m": LOADED}, {"m": Load(running=1, capacity=4)}),
    ({"m": Residency.COLD, "n": LOADED}, {"m": Load(running=0, waiting=2)}),
    ({"n": LOADED}, {}),
    ({"m": Residency.UNKNOWN}, {"": Load(running=3)}),
    ({"m": LOADED, "n": Residency.COLD}, {"m": Load(kv_usage=0.7)}),
    ({"m": LOADED}, {"m": Load(running=2, capacity=2)}),
]
BACKEND_SETS = {
    "a": [spec()],
    "b": [spec(URL_B)],
    "ab": [spec(), spec(URL_B)],
    "a2": [spec(capacity=2), spec(URL_B)],  # a changed spec: a new runtime for URL
}


@settings(max_examples=150, deadline=None)
@given(
    script=st.lists(state_steps, min_size=1, max_size=40),
    remembered_removed=st.sampled_from([0, 32]),  # 0: a removed backend is forgotten at once
)
def test_state_reads_the_same_views_as_an_uncached_derivation_after_any_history(
    script: list[tuple[str, object]], remembered_removed: int
) -> None:
    options = replace(OPTIONS, remembered_removed=remembered_removed)

    async def run() -> None:
        h = make_state(options)
        for url in (URL, URL_B):
            models, loads = ENGINE_STATES[0]
            h.engine.snapshots[url] = snap(models=models, loads=loads)
        h.state.set_backends(BACKEND_SETS["ab"])
        for step, arg in script:
            if step == "advance":
                assert isinstance(arg, float)
                h.clock.advance(arg)
            elif step == "round":
                assert isinstance(arg, str)
                await h.state.run_round(arg)
            elif step == "engine":
                assert isinstance(arg, tuple)
                url, number = arg
                models, loads = ENGINE_STATES[number]
                h.engine.snapshots[url] = snap(models=models, loads=loads)
                h.engine.down.discard(url)
                h.engine.silent.discard(url)
            elif step == "down":
                assert isinstance(arg, str)
                h.engine.down.add(arg)
            elif step == "silent":
                assert isinstance(arg, str)
                h.engine.silent.add(arg)
            elif step == "eject":
                assert isinstance(arg, str)
                h.state.eject(arg, "refused")
            elif step == "reply":
                assert isinstance(arg, int)
                h.state.observe(arg, service_s=0.5 * arg, prefill_s_per_token=0.001)
                h.state.reply_succeeded(arg, h.clock.now())
            elif step == "restore":
                assert isinstance(arg, float)
                h.state.restore_stats([StatRecord(key=f"{URL} m", load_s=arg)])
            elif step == "backends":
                assert isinstance(arg, str)
                h.state.set_backends(BACKEND_SETS[arg])
            elif step == "inflight":
                assert isinstance(arg, int)
                h.inflight[arg] = 1 - h.inflight.get(arg, 0)
            now = h.clock.now()
            for url in (URL, URL_B):
                assert list(h.state.targets_of_backend(url, now)) == _uncached_of_backend(
                    h.state, options, url, now
                )
            for model in ("m", "n"):
                assert list(h.state.targets_for_model(model, now)) == _uncached(
                    h.state, options, model, now
                )

    asyncio.run(run())


async def test_restored_stats_reach_views_already_built() -> None:
    h = make_state(OPTIONS)
    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=1)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    (before,) = h.state.targets_for_model("m", h.clock.now())
    assert before.load_s is None
    h.state.restore_stats([StatRecord(key=f"{URL} m", load_s=0.5)])
    (after,) = h.state.targets_for_model("m", h.clock.now())
    assert after.load_s == 0.5


async def test_a_model_leaving_and_rejoining_one_backend_list_leaves_the_other_backends_views() -> (
    None
):
    h = make_state(OPTIONS)
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.engine.snapshots[URL_B] = snap(models={"m": LOADED})
    h.state.set_backends([spec(), spec(URL_B)])
    await h.state.run_round(URL)
    await h.state.run_round(URL_B)
    assert [v.backend_url for v in h.state.targets_for_model("m", h.clock.now())] == [URL, URL_B]

    h.engine.snapshots[URL] = snap(models={"n": LOADED})
    h.engine.snapshots[URL_B] = snap(models={"m": LOADED, "n": LOADED})
    for _ in range(OPTIONS.rounds_per_full):  # up to the next full round: the model list
        await h.state.run_round(URL)
        await h.state.run_round(URL_B)
    assert [v.backend_url for v in h.state.targets_for_model("m", h.clock.now())] == [URL_B]
    assert [v.backend_url for v in h.state.targets_for_model("n", h.clock.now())] == [URL, URL_B]

    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    for _ in range(OPTIONS.rounds_per_full):
        await h.state.run_round(URL)
    assert [v.backend_url for v in h.state.targets_for_model("m", h.clock.now())] == [URL, URL_B]
