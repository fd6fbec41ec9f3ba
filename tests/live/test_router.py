"""llama.cpp router mode, live (b11312, two models, --models-max 1): load, busy, saturated,
cancelled, swap, unload.

The router lists every model in /v1/models with status.value; Pharos sees one target per
model, reads each one's residency from that field and its capacity, running and waiting
from the per-model `?model=X&autoload=false` paths (pharos.engine.router_mode).
"""

from __future__ import annotations

import pytest

from pharos.engine import WHOLE_BACKEND, Kind, Load, Residency, Signal
from pharos.engine.router_mode import llamacpp_router_residency
from tests.live.engines import RunningEngine
from tests.live.proofs import Prove, source
from tests.live.router import RouterCapture

pytestmark = pytest.mark.live

Router = tuple[RunningEngine, RouterCapture]

COLD = {"smollm2": Residency.COLD, "gemma3": Residency.COLD}
SMOL_LOADED = {"smollm2": Residency.LOADED, "gemma3": Residency.COLD}
EXPECTED = {
    "idle": COLD,
    "loading": {"smollm2": Residency.LOADING, "gemma3": Residency.COLD},
    "loaded": SMOL_LOADED,
    "busy": SMOL_LOADED,
    "saturated": SMOL_LOADED,
    "cancelled": SMOL_LOADED,
    "swapped": {"smollm2": Residency.COLD, "gemma3": Residency.LOADED},
    "unloaded": COLD,
}
# state -> model -> the Load Pharos reads (-np 2 per child); a model not listed is cold or
# loading, and every load signal of it is unknown, never 0.
LOADS = {
    "idle": {},
    "loading": {},
    "loaded": {"smollm2": Load(running=0, waiting=0, capacity=2)},
    "busy": {"smollm2": Load(running=2, waiting=2, capacity=2)},  # 4 streams on 2 slots
    # 8 streams: the child counts 4 to 6 of them waiting (router.py), checked on its own below
    "saturated": {"smollm2": Load(running=2, waiting=6, capacity=2)},
    "cancelled": {"smollm2": Load(running=0, waiting=0, capacity=2)},
    "swapped": {"gemma3": Load(running=0, waiting=0, capacity=2)},
    "unloaded": {},
}


@pytest.mark.parametrize("state", list(EXPECTED))
def test_router_residency_probe_reads_each_state(llamacpp_router: Router, state: str) -> None:
    _, capture = llamacpp_router
    body = (capture.out_dir / state / "v1_models").read_bytes()
    snapshot = llamacpp_router_residency.parse(body)
    assert snapshot.models is not None
    assert {name: info.state for name, info in snapshot.models.items()} == EXPECTED[state]


@pytest.mark.parametrize("state", list(EXPECTED))
def test_router_resolves_as_llamacpp_with_one_target_per_model(
    llamacpp_router: Router, state: str, prove: Prove
) -> None:
    _, capture = llamacpp_router
    observed = capture.observed[state]
    assert observed.plan.kind == Kind.LLAMACPP
    assert observed.resolved.version is not None
    assert observed.resolved.version.startswith(capture.version)
    snapshot = observed.scraped.snapshot
    models = snapshot.models
    assert models is not None
    assert {name: info.state for name, info in models.items()} == EXPECTED[state]
    assert set(observed.plan.per_model) == set(EXPECTED[state])
    if state == "swapped":  # the state where residency moved from one model to the other
        for signal in (Signal.VERSION, Signal.MODELS, Signal.RESIDENCY):
            prove("llamacpp-router", capture.version, signal, source(snapshot, signal))


@pytest.mark.parametrize("state", list(LOADS))
def test_router_loads_are_read_per_model(llamacpp_router: Router, state: str, prove: Prove) -> None:
    _, capture = llamacpp_router
    scraped = capture.observed[state].scraped
    assert dict(scraped.failed) == {}, "a cold or loading model is not a failed probe"
    loads = dict(scraped.snapshot.loads)
    assert WHOLE_BACKEND not in loads  # the router itself has no load signal
    if state == "saturated":
        # how many of the 8 reach the child varies (4 to 6 waiting seen live), and 1500-token
        # streams finish meanwhile (3 seen): running and capacity hold, waiting is above busy's 2
        smol = loads["smollm2"]
        assert (smol.running, smol.capacity) == (2, 2), smol
        assert smol.waiting is not None and 2 < smol.waiting <= 6, smol
        assert set(loads) == {"smollm2"}
    else:
        assert loads == LOADS[state]
    expected = LOADS[state].get("smollm2")
    if expected is not None and state != "saturated":  # the driver's own reading agrees
        assert capture.gauges[state] == (expected.running, expected.waiting)
    if state == "saturated":  # tells running, waiting and capacity apart
        for signal in (Signal.CAPACITY, Signal.RUNNING, Signal.WAITING):
            prove("llamacpp-router", capture.version, signal, source(scraped.snapshot, signal))


def test_a_get_naming_a_model_without_autoload_false_loads_it(llamacpp_router: Router) -> None:
    """Why every per-model probe path carries autoload=false (router_mode's docstring)."""
    _, capture = llamacpp_router
    assert capture.statuses["unloaded"]["smollm2"] == "unloaded"
    assert capture.autoload_get["smollm2"] in ("loading", "loaded"), capture.autoload_get


def test_probing_every_state_never_loaded_a_model(llamacpp_router: Router) -> None:
    """Resolve + scrape ran in every state with per-model GETs: the statuses the driver saw
    right after (recorded next) are the ones it set up, so no probe loaded anything."""
    _, capture = llamacpp_router
    for state in ("idle", "unloaded"):
        assert set(capture.statuses[state].values()) == {"unloaded"}, state
        body = (capture.out_dir / state / "v1_models").read_bytes()
        snapshot = llamacpp_router_residency.parse(body)
        assert snapshot.models is not None
        assert {info.state for info in snapshot.models.values()} == {Residency.COLD}, state
