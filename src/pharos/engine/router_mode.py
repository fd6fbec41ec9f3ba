"""llama.cpp router mode (`llama-server --models-dir DIR`): one target per listed model.

A router llama-server serves several models, starting a child llama-server per loaded
model (llama-swap style). Its `/v1/models` lists every model it can serve, each with
`status.value`; a single-model llama-server lists its model with no `status` at all, so
the residency probe yields no value there and Resolve drops it ("no value"), and with it
every per-model probe (they run over the models the residency probe listed).

The router's own `/props` has no `total_slots` and its bare `/metrics` and `/slots`
answer 400 (tests/captures/llamacpp-router/b11312/*/paths.tsv). The child's values are
reached through the router with `?model=NAME&autoload=false`: 200 with the child's body
while the model is loaded, 503 while it loads, 400 "model is not loaded" while it is
cold. Those non-2xx answers mean "unknown for this model now", never a failure.

Never drop `autoload=false`: the router LOADS a model on any GET that names it without
it. server-models.cpp (b11312, vendored in llama-cpp-python 0.3.36) `is_autoload()`
falls back to `--models-autoload` (on by default) and `proxy_get` then calls
`ensure_model_ready(name)`; live, `GET /props?model=smollm2` on the cold router turned
smollm2 `loading` (tests/live/test_router.py::test_a_get_naming_a_model_loads_it).
Even with autoload=false the GET does not refresh the model's last-use time (proxy_get
passes update_last_usage=false), so probing never keeps a model in memory.

Status values seen live on b11312: `unloaded`, `loading`, `loaded`. The README also names
`sleeping` and `downloading` [U]: never recorded, so they read unknown until a capture
shows what they mean for routing.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from urllib.parse import urlencode

import msgspec

from pharos.engine import values
from pharos.engine.jsonprobe import json_probe
from pharos.engine.prom import prom
from pharos.engine.types import (
    WHOLE_BACKEND,
    Feed,
    Load,
    ModelInfo,
    Probe,
    Residency,
    Signal,
    Snapshot,
)
from pharos.engine.versions import llamacpp_deferred_trusted

ROUTER_STATUS: MappingProxyType[str, Residency] = MappingProxyType(
    {
        "loaded": Residency.LOADED,
        "loading": Residency.LOADING,
        "unloaded": Residency.COLD,
    }
)
"""Recorded router status values; anything else is unknown, never a guess."""


def per_model_path(path: str, model: str) -> str:
    """`/metrics` + `smollm2` -> `/metrics?model=smollm2&autoload=false`: never loads it."""
    return f"{path}?{urlencode({'model': model, 'autoload': 'false'})}"


class _Status(msgspec.Struct):
    value: str | None = None


class _RouterModel(msgspec.Struct):
    id: str
    status: _Status | None = None


class _RouterModels(msgspec.Struct):
    data: list[_RouterModel] | None = None


class _ChildProps(msgspec.Struct):
    total_slots: int | None = None


def _router_residency(body: _RouterModels) -> Snapshot:
    if body.data is None:
        return Snapshot()
    listed = [m for m in body.data if m.status is not None]
    if not listed:
        return Snapshot()  # single-model mode: no status field, nothing to say
    return Snapshot(
        models=MappingProxyType(
            {
                m.id: ModelInfo(state=ROUTER_STATUS.get(m.status.value or "", Residency.UNKNOWN))
                for m in listed
                if m.status is not None
            }
        )
    )


def _child_capacity(body: _ChildProps) -> Snapshot:
    if body.total_slots is None:
        return Snapshot()
    capacity = values.count(body.total_slots, Signal.CAPACITY)
    return Snapshot(loads=MappingProxyType({WHOLE_BACKEND: Load(capacity=capacity)}))


def _per_model(probe: Probe) -> Probe:
    assert probe.feed.path is not None
    return replace(probe, feed=Feed(path=probe.feed.path, per_model=True))


llamacpp_router_residency: Probe = json_probe(
    "llamacpp-router-residency",
    "/v1/models",
    Signal.RESIDENCY,
    _RouterModels,
    _router_residency,
)
"""Residency per model from the router's /v1/models `status.value` (loaded/loading/unloaded)."""

llamacpp_router_capacity: Probe = _per_model(
    json_probe("llamacpp-router-capacity", "/props", Signal.CAPACITY, _ChildProps, _child_capacity)
)
"""Per model: the child's `total_slots` (`-np`), from `/props?model=NAME&autoload=false`."""

llamacpp_router_running: Probe = _per_model(
    prom("llamacpp-router-running", "/metrics", Signal.RUNNING, "llamacpp:requests_processing")
)
"""Per model: the child's `requests_processing`, from `/metrics?model=NAME&autoload=false`."""

llamacpp_router_waiting: Probe = _per_model(
    prom(
        "llamacpp-router-waiting",
        "/metrics",
        Signal.WAITING,
        "llamacpp:requests_deferred",
        when=llamacpp_deferred_trusted,
    )
)
"""Per model: the child's `requests_deferred` (trusted from b8772, like the single server)."""

ROUTER_PROBES: tuple[Probe, ...] = (
    llamacpp_router_residency,
    llamacpp_router_capacity,
    llamacpp_router_running,
    llamacpp_router_waiting,
)
"""What recipes.LLAMACPP_ROUTER_MODE holds, right after openai-models."""
