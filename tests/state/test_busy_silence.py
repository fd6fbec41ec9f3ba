"""A scrape that times out while Pharos has requests on the backend is not a failure.

llama-cpp-python's server answers nothing, /v1/models included, while it generates (live,
0.3.36): its rounds time out mid-reply. Such a round holds the backend up and marks nothing
down; its load signals go unknown by their freshness rules (None, never 0). It is marked down
only when it stays silent with nothing in flight past the staleness bound, or refuses a
connection.
"""

from __future__ import annotations

import logging

import pytest

from pharos.engine.types import Load, Residency
from pharos.state import StateOptions
from pharos.state.derive import hold_bound_s
from tests.state.fakes import URL, Harness, make_state, snap, spec

LOADED = Residency.LOADED
OPTIONS = StateOptions(fast_interval_s=1.0, full_interval_s=5.0, stale_factor=3.0)
BOUND_S = hold_bound_s(OPTIONS)  # 15 s stale window + 1.1 s to the next round + 3 s timeout


async def _busy_backend() -> tuple[Harness, int]:
    """One backend serving m with one request of ours on it, after one answered round."""
    h = make_state(OPTIONS)
    h.engine.snapshots[URL] = snap(models={"m": LOADED}, loads={"m": Load(running=1, capacity=2)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    target_id = h.state.target_id_of(f"{URL} m")
    assert target_id is not None
    h.inflight[target_id] = 1
    return h, target_id


async def _rounds(h: Harness, seconds: int) -> None:
    for _ in range(seconds):
        h.clock.advance(1.0)
        await h.state.run_round(URL)


async def test_timeouts_while_our_request_is_in_flight_keep_the_backend_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.state")
    h, target_id = await _busy_backend()
    h.engine.silent.add(URL)
    await _rounds(h, 40)  # far past the bound counted from its last answered round

    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert view.up
    # its loads are unknown now (stale), never 0
    assert view.running is None and view.waiting is None and view.capacity is None
    [status] = h.state.backends()
    assert status.up and status.reachable is True and status.down_reason is None
    assert h.decisions.count((URL, "scrape", "busy_timeout")) == 40
    assert (URL, "scrape", "unreachable") not in h.decisions
    assert not [r for r in caplog.records if "down" in r.getMessage()]


@pytest.mark.parametrize(
    ("idle_s", "up"),
    [
        # seconds of silence after our last request ended | still up
        (1, True),
        (int(BOUND_S), True),
        (int(BOUND_S) + 1, False),  # past the bound: marked down by the next round
    ],
)
async def test_silence_with_nothing_in_flight_marks_it_down_past_the_bound(
    idle_s: int, up: bool
) -> None:
    h, target_id = await _busy_backend()
    h.engine.silent.add(URL)
    await _rounds(h, 3)
    h.inflight[target_id] = 0  # the reply ended; the engine still answers nothing
    await _rounds(h, idle_s)

    view = h.state.target(target_id, h.clock.now())
    [status] = h.state.backends()
    assert view is not None and view.up is up
    assert status.up is up
    assert status.reachable is up
    assert ((URL, "scrape", "unreachable") in h.decisions) is not up


async def test_an_idle_backend_that_times_out_is_marked_down_at_once() -> None:
    h = make_state(OPTIONS)
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    h.engine.silent.add(URL)
    await _rounds(h, 1)
    [status] = h.state.backends()
    assert status.reachable is False and status.down_reason == "unreachable"
    assert (URL, "scrape", "busy_timeout") not in h.decisions


async def test_a_refused_connection_marks_a_busy_backend_down_and_ends_the_hold() -> None:
    h, target_id = await _busy_backend()
    h.engine.silent.add(URL)
    await _rounds(h, 20)
    h.engine.silent.discard(URL)
    h.engine.down.add(URL)  # now it refuses connections: the process is gone
    await _rounds(h, 1)

    [status] = h.state.backends()
    view = h.state.target(target_id, h.clock.now())
    assert status.reachable is False and status.down_reason == "unreachable"
    # the hold is gone and the last answered full round is 21 s old (> 15 s): not up
    assert view is not None and not view.up and not status.up


async def test_a_resolve_that_times_out_while_busy_holds_it_up_too() -> None:
    h, target_id = await _busy_backend()
    h.engine.silent.add(URL)
    h.clock.advance(OPTIONS.resolve_every_s)  # a resolve is due
    await h.state.run_round(URL)
    await _rounds(h, 20)

    view = h.state.target(target_id, h.clock.now())
    [status] = h.state.backends()
    assert (URL, "resolve", "busy_timeout") in h.decisions
    assert (URL, "resolve", "failed") not in h.decisions
    assert view is not None and view.up and status.reachable is True


async def test_an_answered_round_ends_the_hold() -> None:
    h, target_id = await _busy_backend()
    h.engine.silent.add(URL)
    await _rounds(h, 20)
    h.engine.silent.discard(URL)
    await _rounds(h, 1)  # answered: its values are fresh again
    h.engine.silent.add(URL)
    h.inflight[target_id] = 0
    await _rounds(h, 1)  # idle and silent: no hold left from before the answered round

    [status] = h.state.backends()
    assert status.reachable is False
