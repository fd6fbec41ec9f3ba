"""Generation bumps (unload, unlisted, new version) and replies showing a model loaded."""

from __future__ import annotations

from pharos.engine.types import Residency
from tests.state.fakes import URL, make_state, snap, spec

LOADED = Residency.LOADED
COLD = Residency.COLD


async def _full_round(h, snapshot) -> None:
    """Run rounds until the next full one has read `snapshot`."""
    h.engine.snapshots[URL] = snapshot
    while True:
        h.clock.advance(1.0)
        await h.state.run_round(URL)
        if h.engine.calls[-1][1] != "fast":
            return


async def _setup(models):
    h = make_state()
    h.engine.snapshots[URL] = snap(models=models)
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    return h


def _gen(h, model: str) -> int:
    target_id = h.state.target_id_of(f"{URL} {model}")
    generation = h.state.generation_of(target_id)
    assert generation is not None
    return generation


async def test_unload_bumps_generation_once() -> None:
    h = await _setup({"a": LOADED, "b": COLD})
    assert (_gen(h, "a"), _gen(h, "b")) == (0, 0)  # first sight of cold is no unload
    await _full_round(h, snap(models={"a": COLD, "b": COLD}))
    assert (_gen(h, "a"), _gen(h, "b")) == (1, 0)
    await _full_round(h, snap(models={"a": COLD, "b": COLD}))
    assert _gen(h, "a") == 1
    assert (URL, "generation", "unloaded") in h.decisions


async def test_loading_then_cold_bumps() -> None:
    h = await _setup({"a": Residency.LOADING})
    await _full_round(h, snap(models={"a": COLD}))
    assert _gen(h, "a") == 1


async def test_unknown_residency_in_between_still_bumps_on_cold() -> None:
    h = await _setup({"a": LOADED})
    await _full_round(h, snap(models={"a": Residency.UNKNOWN}))
    await _full_round(h, snap(models={"a": COLD}))
    assert _gen(h, "a") == 1


async def test_model_leaving_the_list_bumps() -> None:
    h = await _setup({"a": LOADED, "b": LOADED})
    await _full_round(h, snap(models={"b": LOADED}))
    assert (_gen(h, "a"), _gen(h, "b")) == (1, 0)
    assert (URL, "generation", "unlisted") in h.decisions
    view = h.state.target(h.state.target_id_of(f"{URL} a"), h.clock.now())
    assert view is not None
    assert not view.up  # not listed: nothing to route to


async def test_unknown_model_list_keeps_the_last_one() -> None:
    h = await _setup({"a": LOADED})
    await _full_round(h, snap(models=None))
    assert _gen(h, "a") == 0
    assert len(h.state.targets_for_model("a", h.clock.now())) == 1


async def test_new_engine_version_bumps_every_target() -> None:
    h = await _setup({"a": LOADED, "b": COLD})
    await _full_round(h, snap(version="1.1", models={"a": LOADED, "b": COLD}))
    assert (_gen(h, "a"), _gen(h, "b")) == (1, 1)
    assert (URL, "generation", "new_version") in h.decisions


async def test_reply_shows_model_loaded_until_next_full_round() -> None:
    h = await _setup({"a": COLD})
    target_id = h.state.target_id_of(f"{URL} a")
    h.clock.advance(0.5)
    h.state.reply_succeeded(target_id, h.clock.now())
    view = h.state.target(target_id, h.clock.now())
    assert view is not None and view.residency is LOADED
    h.clock.advance(0.5)
    await h.state.run_round(URL)  # a fast round has no say on residency
    assert h.engine.calls[-1][1] == "fast"
    assert h.state.target(target_id, h.clock.now()).residency is LOADED
    await _full_round(h, snap(models={"a": COLD}))
    assert h.state.target(target_id, h.clock.now()).residency is COLD
    assert _gen(h, "a") == 1  # it was loaded by the reply, then went cold


async def test_full_round_started_before_reply_does_not_override_it() -> None:
    h = await _setup({"a": COLD})
    target_id = h.state.target_id_of(f"{URL} a")
    for _ in range(4):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    h.clock.advance(1.0)
    round_start = h.clock.now()
    h.engine.snapshots[URL] = snap(models={"a": COLD})

    def reply_while_scraping() -> None:
        h.clock.advance(0.2)
        h.state.reply_succeeded(target_id, h.clock.now())

    h.engine.during_scrape = reply_while_scraping
    await h.state.run_round(URL)
    assert h.engine.calls[-1][1] == "full"
    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert view.residency is LOADED  # the round read the engine before the reply
    assert _gen(h, "a") == 0
    assert round_start < h.clock.now()
