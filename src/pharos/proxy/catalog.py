"""Aggregated model lists and Ollama's informational routes (spec §9)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Iterable

import aiohttp
import msgspec
from aiohttp import web

from pharos.engine.types import Kind
from pharos.proxy.errors import ClientError, error_response, model_not_found
from pharos.state import State

_INFO_TIMEOUT = aiohttp.ClientTimeout(total=5.0)


def served_models(state: State, now: float) -> list[str]:
    """Models at least one up, non-draining backend serves, by the names clients use."""
    return sorted({v.model for v in state.all_targets(now) if v.up and not v.draining})


def openai_model(name: str) -> dict[str, object]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "pharos"}


def openai_model_list(names: Iterable[str]) -> dict[str, object]:
    return {"object": "list", "data": [openai_model(name) for name in names]}


def _ollama_backends(state: State, now: float, model: str | None = None) -> list[str]:
    urls: list[str] = []
    for view in state.all_targets(now):
        if view.kind is not Kind.OLLAMA or not view.up or view.draining:
            continue
        if model is not None and view.model != model:
            continue
        if view.backend_url not in urls:
            urls.append(view.backend_url)
    return urls


async def _get_json(session: aiohttp.ClientSession, url: str) -> object:
    try:
        async with session.get(url, timeout=_INFO_TIMEOUT) as response:
            if response.status != 200:
                return None
            return msgspec.json.decode(await response.read())
    except (aiohttp.ClientError, TimeoutError, msgspec.DecodeError):
        return None


async def aggregate_ollama(
    state: State,
    session: aiohttp.ClientSession,
    now: float,
    path: str,
    allowed: Collection[str],
) -> dict[str, object]:
    """/api/tags or /api/ps of every up Ollama backend, one entry per model name."""
    urls = _ollama_backends(state, now)
    bodies = await asyncio.gather(*(_get_json(session, url.rstrip("/") + path) for url in urls))
    seen: dict[str, object] = {}
    for body in bodies:
        models = body.get("models") if isinstance(body, dict) else None
        if not isinstance(models, list):
            continue
        for entry in models:
            if not isinstance(entry, dict):
                continue
            name = entry.get("name") or entry.get("model")
            if not isinstance(name, str) or name in seen:
                continue
            if allowed and name not in allowed:
                continue
            seen[name] = entry
    return {"models": list(seen.values())}


async def forward_show(
    state: State,
    session: aiohttp.ClientSession,
    now: float,
    body: bytes,
    allowed: Collection[str],
) -> web.StreamResponse:
    """/api/show goes to one up Ollama backend serving the model, without taking a slot."""
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        decoded = None
    model = None
    if isinstance(decoded, dict):
        model = decoded.get("model") or decoded.get("name")
    if not isinstance(model, str) or not model:
        return error_response(
            ClientError(400, "model is required", "invalid_request_error", "missing_model"),
            ollama=True,
        )
    if allowed and model not in allowed:
        return error_response(model_not_found(model), ollama=True)
    for url in _ollama_backends(state, now, model):
        try:
            async with session.post(
                url.rstrip("/") + "/api/show", data=body, timeout=_INFO_TIMEOUT
            ) as response:
                return web.Response(
                    status=response.status,
                    body=await response.read(),
                    content_type="application/json",
                )
        except (aiohttp.ClientError, TimeoutError):
            continue
    return error_response(
        ClientError(404, f"model '{model}' not found", "invalid_request_error", "model_not_found"),
        ollama=True,
    )


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:4])


def oldest_ollama_version(state: State) -> str | None:
    """Clients gate features on /api/version: answer with the oldest up Ollama's."""
    versions = [
        b.version
        for b in state.backends()
        if b.kind is Kind.OLLAMA and b.up and b.version is not None
    ]
    return min(versions, key=_version_key) if versions else None
