"""The router-mode capture: llama-server --models-dir with two models and --models-max 1,
taken through idle -> loading -> loaded -> swapped -> unloaded, each state recorded.

Besides the usual paths it records what a router serves per model: `/props`, `/metrics` and
`/slots` with `?model=NAME&autoload=false` (a probe must never make the router load a
model; `autoload=false` is how a GET says so).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from pharos.engine.record import RECORD_PATHS, meta_yaml, record
from tests.live.capture import PROMPT_MARKER

ROUTER_MODELS = ("smollm2", "gemma3")
"""File stems in the models dir: the router lists each GGUF under its file name."""
STATE_TIMEOUT_S = 120.0


def per_model_paths(model: str) -> tuple[str, ...]:
    return tuple(
        f"{path}?model={model}&autoload=false" for path in ("/props", "/metrics", "/slots")
    )


@dataclass
class RouterCapture:
    out_dir: Path
    version: str
    statuses: dict[str, dict[str, str]] = field(default_factory=dict)  # state -> model -> status
    observed: dict[str, Any] = field(default_factory=dict)


async def _statuses(session: aiohttp.ClientSession, url: str) -> dict[str, str]:
    async with session.get(url + "/v1/models") as reply:
        body = await reply.json()
    return {m["id"]: (m.get("status") or {}).get("value", "") for m in body.get("data", [])}


async def _wait_status(
    session: aiohttp.ClientSession, url: str, wanted: dict[str, str]
) -> dict[str, str]:
    deadline = time.monotonic() + STATE_TIMEOUT_S
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = await _statuses(session, url)
        if all(seen.get(m) == s for m, s in wanted.items()):
            return seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"router never reached {wanted}; last {seen}")


async def _chat(session: aiohttp.ClientSession, url: str, model: str) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"{PROMPT_MARKER} router. Say hi."}],
        "max_tokens": 4,
    }
    async with session.post(url + "/v1/chat/completions", json=body) as reply:
        await reply.read()
        if reply.status != 200:
            raise AssertionError(f"router chat for {model} answered {reply.status}")


async def capture_router(
    session: aiohttp.ClientSession,
    url: str,
    root: Path,
    version: str,
    meta: dict[str, str],
    observe: Callable[[str], Awaitable[Any]],
) -> RouterCapture:
    out = root / "llamacpp-router" / version
    result = RouterCapture(out_dir=out, version=version)
    paths = RECORD_PATHS + tuple(p for m in ROUTER_MODELS for p in per_model_paths(m))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "meta.yaml").write_text(meta_yaml(meta))

    async def state(name: str) -> None:
        result.statuses[name] = await _statuses(session, url)
        result.observed[name] = await observe(name)
        await record(session, url, out / name, meta={**meta, "state": name}, paths=paths)

    await _wait_status(session, url, {m: "unloaded" for m in ROUTER_MODELS})
    await state("idle")
    first = asyncio.create_task(_chat(session, url, "smollm2"))
    try:
        await _wait_status(session, url, {"smollm2": "loading"})
        await state("loading")
    finally:
        await first
    await _wait_status(session, url, {"smollm2": "loaded", "gemma3": "unloaded"})
    await state("loaded")
    await _chat(session, url, "gemma3")
    await _wait_status(session, url, {"smollm2": "unloaded", "gemma3": "loaded"})
    await state("swapped")
    async with session.post(url + "/models/unload", json={"model": "gemma3"}) as reply:
        await reply.read()
        if reply.status != 200:
            raise AssertionError(f"/models/unload answered {reply.status}")
    await _wait_status(session, url, {m: "unloaded" for m in ROUTER_MODELS})
    await state("unloaded")
    return result
