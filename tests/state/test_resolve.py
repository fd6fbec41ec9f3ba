"""Re-resolve triggers (§4): a failing planned probe, a new version, every 10 minutes."""

from __future__ import annotations

from pharos.engine.types import Load, Residency
from tests.state.fakes import URL, make_state, snap, spec


async def _setup():
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED}, loads={"m": Load(running=1)})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    return h


async def test_failing_probe_triggers_resolve_next_round() -> None:
    h = await _setup()
    h.engine.failed[URL] = {"vllm-running": "status 500"}
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert (URL, "scrape", "probe_failed") in h.decisions
    h.engine.failed.clear()
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert [kind for _, kind in h.engine.calls] == ["resolve", "fast", "resolve"]
    assert h.decisions[-1] == (URL, "resolve", "same_plan")


async def test_new_version_triggers_resolve() -> None:
    h = await _setup()
    h.engine.snapshots[URL] = snap(version="2.0", models={"m": Residency.LOADED})
    for _ in range(5):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    assert (URL, "scrape", "new_version") in h.decisions
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert h.engine.calls[-1] == (URL, "resolve")
    assert h.decisions[-1] == (URL, "resolve", "new_plan")


async def test_resolves_again_every_ten_minutes() -> None:
    h = await _setup()
    h.clock.advance(599.0)
    await h.state.run_round(URL)
    assert h.engine.calls[-1][1] != "resolve"
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert h.engine.calls[-1] == (URL, "resolve")


async def test_failed_resolve_is_retried_each_round() -> None:
    h = make_state()
    h.engine.down.add(URL)
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    assert h.state.targets_of_backend(URL, h.clock.now()) == []
    h.engine.down.clear()
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert [kind for _, kind in h.engine.calls] == ["resolve", "resolve"]
    assert [d[2] for d in h.decisions] == ["failed", "new_plan"]
    assert len(h.state.targets_for_model("m", h.clock.now())) == 1


async def test_scrape_ok_decision() -> None:
    h = await _setup()
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert h.decisions == [(URL, "resolve", "new_plan"), (URL, "scrape", "ok")]


async def test_a_round_that_raises_does_not_end_the_scraper() -> None:
    h = await _setup()

    def boom() -> None:
        raise RuntimeError("engine surprise")

    h.engine.during_scrape = boom
    h.clock.advance(1.0)
    await h.state.run_round(URL)  # does not raise
    (status,) = h.state.backends()
    assert status.reachable is False
    assert status.down_reason is not None and "engine surprise" in status.down_reason
    assert h.rounds[-1] == URL


async def test_incomplete_plan_resolves_again_after_a_full_interval() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.engine.incomplete.add(URL)
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    for _ in range(5):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    calls = [kind for _, kind in h.engine.calls]
    assert calls == ["resolve", "fast", "fast", "fast", "fast", "resolve"]


async def test_round_with_nothing_to_read_sends_nothing_and_keeps_ejection() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": Residency.COLD})
    h.engine.no_fast_paths.add(URL)  # e.g. Ollama: no load probes
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    h.state.eject(URL, "connection refused")
    for _ in range(4):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    assert [kind for _, kind in h.engine.calls] == ["resolve"]
    (status,) = h.state.backends()
    assert status.ejected == "connection refused"
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    (status,) = h.state.backends()
    assert h.engine.calls[-1][1] == "full"
    assert status.ejected is None and status.up
