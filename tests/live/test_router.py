"""llama.cpp router mode, live (b11312, two models, --models-max 1): load, swap, unload.

The router lists every model in /v1/models with status.value; Pharos must see one target
per model and read each one's residency from that field (pharos.engine.router_mode).
"""

from __future__ import annotations

import pytest

from pharos.engine import RECIPES, WHOLE_BACKEND, Kind, Residency
from pharos.engine.router_mode import llamacpp_router_residency
from tests.live.engines import RunningEngine
from tests.live.router import RouterCapture

pytestmark = pytest.mark.live

Router = tuple[RunningEngine, RouterCapture]

EXPECTED = {
    "idle": {"smollm2": Residency.COLD, "gemma3": Residency.COLD},
    "loading": {"smollm2": Residency.LOADING, "gemma3": Residency.COLD},
    "loaded": {"smollm2": Residency.LOADED, "gemma3": Residency.COLD},
    "swapped": {"smollm2": Residency.COLD, "gemma3": Residency.LOADED},
    "unloaded": {"smollm2": Residency.COLD, "gemma3": Residency.COLD},
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
    llamacpp_router: Router, state: str
) -> None:
    _, capture = llamacpp_router
    observed = capture.observed[state]
    assert observed.plan.kind == Kind.LLAMACPP
    assert observed.resolved.version is not None
    assert observed.resolved.version.startswith(capture.version)
    models = observed.scraped.snapshot.models
    assert models is not None and set(models) == set(EXPECTED[state])
    # The router's /props has no total_slots: capacity is unknown, never 0.
    whole = observed.scraped.snapshot.loads.get(WHOLE_BACKEND)
    assert whole is None or whole.capacity is None


ROUTER_PROBE_IN_RECIPE = llamacpp_router_residency.name in {
    probe.name for probe in RECIPES[Kind.LLAMACPP]
}


@pytest.mark.xfail(
    not ROUTER_PROBE_IN_RECIPE,
    reason="recipes.LLAMACPP_ROUTER_MODE does not hold llamacpp-router-residency yet",
    strict=True,
)
@pytest.mark.parametrize("state", list(EXPECTED))
def test_resolve_reads_router_residency(llamacpp_router: Router, state: str) -> None:
    _, capture = llamacpp_router
    models = capture.observed[state].scraped.snapshot.models
    assert models is not None
    assert {name: info.state for name, info in models.items()} == EXPECTED[state]
