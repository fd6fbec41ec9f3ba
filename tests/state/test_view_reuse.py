"""State reuses a target's view until the target changes: never a different view than a fresh
build (derive.target_view) would give, whatever is written and whenever it is read."""

from __future__ import annotations

import math
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.engine.types import Load, ModelInfo, Residency, Snapshot
from pharos.state import StateOptions
from pharos.state.derive import target_view
from pharos.state.records import BackendRuntime, Observed, TargetRecord
from pharos.state.stats import TargetStats
from pharos.state.views import ViewCache, last_fresh_at
from tests.state.fakes import URL, make_state, snap, spec

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
