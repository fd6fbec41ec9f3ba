"""Replay of the llama.cpp router-mode probe on our recording of b11312 router mode
(tests/captures/llamacpp-router/b11312, recorded by tests/live/test_router.py) and on
every single-model llama.cpp capture, where it must read nothing."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from tools.captures import OUR_CAPTURES, engine_roots

from pharos.engine import Kind, Load, resolve, scrape
from pharos.engine.captures import body_name
from pharos.engine.router_mode import ROUTER_PROBES, llamacpp_router_residency, per_model_path
from pharos.engine.types import ProbeError, Residency, Signal
from tests.engine.server import NO_ANSWER, Reply, serve

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


def _router_routes(state: str, models_body: bytes | None = None) -> dict[str, Reply]:
    """The recorded router state as a scripted server (path + query -> reply)."""
    routes: dict[str, Reply] = {}
    for line in (ROUTER_CAPTURE / state / "paths.tsv").read_text().splitlines():
        path, status, _ = line.split("\t")
        file = ROUTER_CAPTURE / state / body_name(path)
        body = file.read_bytes() if file.is_file() else b""
        routes[path] = Reply(int(status), body, "application/json")
    if models_body is not None:
        routes["/v1/models"] = Reply(200, models_body, "application/json")
    return routes


async def test_a_model_added_to_the_router_makes_scrape_ask_for_a_resolve() -> None:
    async with aiohttp.ClientSession() as session:
        async with serve(_router_routes("loaded")) as engine:
            plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP, timeout_s=2.0)
        assert plan.per_model == ("gemma3", "smollm2")
        listed = json.loads((ROUTER_CAPTURE / "loaded" / "v1_models").read_bytes())
        listed["data"].append({"id": "qwen3", "status": {"value": "unloaded"}})
        async with serve(_router_routes("loaded", json.dumps(listed).encode())) as engine:
            result = await scrape(plan, session, engine.base_url, timeout_s=2.0)
            asked = set(engine.hits)
    assert result.failed == {"llamacpp-router-residency": "model list changed"}
    assert result.needs_resolve
    # every per-model GET carried autoload=false, and none named the new model yet
    per_model = {path for path in asked if "?" in path}
    assert per_model and all(path.endswith("&autoload=false") for path in per_model)
    assert not any("qwen3" in path for path in asked)


async def test_a_router_that_stops_answering_per_model_fails_the_probe_not_the_model() -> None:
    async with aiohttp.ClientSession() as session:
        async with serve(_router_routes("loaded")) as engine:
            plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP, timeout_s=2.0)
        routes = _router_routes("loaded")
        routes["/metrics?model=smollm2&autoload=false"] = NO_ANSWER
        async with serve(routes) as engine:
            result = await scrape(plan, session, engine.base_url, timeout_s=2.0)
    # running and waiting share that GET: both fail (re-resolve), capacity still reads
    assert set(result.failed) == {"llamacpp-router-running", "llamacpp-router-waiting"}
    assert dict(result.snapshot.loads) == {"smollm2": Load(capacity=2)}
