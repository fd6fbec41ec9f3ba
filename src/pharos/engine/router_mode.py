"""llama.cpp router mode (`llama-server --models-dir DIR`): one target per listed model.

A router llama-server serves several models, starting a child llama-server per loaded
model (llama-swap style). Its `/v1/models` lists every model it can serve, each with
`status.value`; a single-model llama-server lists its model with no `status` at all, so
this probe yields no value there and Resolve drops it ("no value").

Status values seen live on b11312 (tests/captures/llamacpp-router/b11312): `unloaded`,
`loading`, `loaded`. The README also names `sleeping` and `downloading` [U]: never
recorded, so they read unknown until a capture shows what they mean for routing.
"""

from __future__ import annotations

from types import MappingProxyType

import msgspec

from pharos.engine.jsonprobe import json_probe
from pharos.engine.types import ModelInfo, Probe, Residency, Signal, Snapshot

ROUTER_STATUS: MappingProxyType[str, Residency] = MappingProxyType(
    {
        "loaded": Residency.LOADED,
        "loading": Residency.LOADING,
        "unloaded": Residency.COLD,
    }
)
"""Recorded router status values; anything else is unknown, never a guess."""


class _Status(msgspec.Struct):
    value: str | None = None


class _RouterModel(msgspec.Struct):
    id: str
    status: _Status | None = None


class _RouterModels(msgspec.Struct):
    data: list[_RouterModel] | None = None


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


llamacpp_router_residency: Probe = json_probe(
    "llamacpp-router-residency",
    "/v1/models",
    Signal.RESIDENCY,
    _RouterModels,
    _router_residency,
)
"""Residency per model from the router's /v1/models `status.value` (loaded/loading/unloaded)."""

ROUTER_PROBES: tuple[Probe, ...] = (llamacpp_router_residency,)
"""What recipes.LLAMACPP_ROUTER_MODE should hold, right after openai-models."""
