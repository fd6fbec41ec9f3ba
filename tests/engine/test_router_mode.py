"""Replay of the llama.cpp router-mode probe on our recording of b11312 router mode
(tests/captures/llamacpp-router/b11312, recorded by tests/live/test_router.py) and on
every single-model llama.cpp capture, where it must read nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tools.captures import OUR_CAPTURES, engine_roots

from pharos.engine.router_mode import ROUTER_PROBES, llamacpp_router_residency, per_model_path
from pharos.engine.types import ProbeError, Residency, Signal

ROUTER_CAPTURE = OUR_CAPTURES / "llamacpp-router" / "b11312"

EXPECTED = {
    "idle": {"smollm2": Residency.COLD, "gemma3": Residency.COLD},
    "loading": {"smollm2": Residency.LOADING, "gemma3": Residency.COLD},
    "loaded": {"smollm2": Residency.LOADED, "gemma3": Residency.COLD},
    "swapped": {"smollm2": Residency.COLD, "gemma3": Residency.LOADED},
    "unloaded": {"smollm2": Residency.COLD, "gemma3": Residency.COLD},
}


def test_router_probes_read_residency_and_per_model_loads_never_autoloading() -> None:
    # (signal, path, asked once per listed model)
    assert [(p.signal, p.feed.path, p.feed.per_model) for p in ROUTER_PROBES] == [
        (Signal.RESIDENCY, "/v1/models", False),
        (Signal.CAPACITY, "/props", True),
        (Signal.RUNNING, "/metrics", True),
        (Signal.WAITING, "/metrics", True),
    ]
    assert per_model_path("/metrics", "smollm2") == "/metrics?model=smollm2&autoload=false"
    # a name with query characters cannot smuggle autoload=true in
    assert per_model_path("/props", "a&autoload=true") == (
        "/props?model=a%26autoload%3Dtrue&autoload=false"
    )


@pytest.mark.parametrize("state", list(EXPECTED))
def test_residency_per_model_in_each_recorded_state(state: str) -> None:
    body = (ROUTER_CAPTURE / state / "v1_models").read_bytes()
    snapshot = llamacpp_router_residency.parse(body)
    assert snapshot.models is not None
    assert {name: info.state for name, info in snapshot.models.items()} == EXPECTED[state]
    assert snapshot.loads == {}
    assert snapshot.version is None


@pytest.mark.parametrize("state", list(EXPECTED))
def test_models_path_lists_the_same_statuses(state: str) -> None:
    """The router answers /models and /v1/models with one handler."""

    def statuses(name: str) -> dict[str, str]:
        body = json.loads((ROUTER_CAPTURE / state / name).read_bytes())
        return {m["id"]: m["status"]["value"] for m in body["data"]}

    assert statuses("models") == statuses("v1_models")


def _single_model_bodies() -> list[Path]:
    return sorted(
        body for root in engine_roots() for body in (root / "llamacpp").glob("*/*/v1_models")
    )


def test_single_model_llamacpp_reads_nothing() -> None:
    bodies = _single_model_bodies()
    assert bodies, "no single-model llama.cpp capture found (PHAROS_CAPTURES?)"
    for body in bodies:
        snapshot = llamacpp_router_residency.parse(body.read_bytes())
        assert snapshot.models is None, body


def test_unrecorded_status_reads_unknown_and_bad_shapes_raise() -> None:
    body = (
        b'{"data":[{"id":"a","status":{"value":"sleeping"}},'
        b'{"id":"b","status":{"value":"loaded"}}]}'
    )
    snapshot = llamacpp_router_residency.parse(body)
    assert snapshot.models is not None
    assert snapshot.models["a"].state is Residency.UNKNOWN
    assert snapshot.models["b"].state is Residency.LOADED
    with pytest.raises(ProbeError):
        llamacpp_router_residency.parse(b'{"data":[{"id":"a","status":"loaded"}]}')
    with pytest.raises(ProbeError):
        llamacpp_router_residency.parse(b"<html>")
