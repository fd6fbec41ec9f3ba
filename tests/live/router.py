"""The router-mode capture: llama-server --models-dir with two models and --models-max 1,
taken through idle -> loading -> loaded -> busy (4 streams on smollm2's 2 slots) ->
saturated (8) -> cancelled -> swapped -> unloaded, each state recorded; then one GET naming
a model WITHOUT autoload=false, to see whether it loads the model (it does, on b11312).

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
from tests.live.capture import (
    BUSY_REQUESTS,
    LLAMACPP_GAUGE,
    PROMPT_MARKER,
    SATURATED_REQUESTS,
    SLOW_PROMPT,
)
from tests.live.engines import engine_cache, gemma_gguf, smollm2_gguf

ROUTER_MODELS = ("smollm2", "gemma3")
"""File stems in the models dir: the router lists each GGUF under its file name."""
STATE_TIMEOUT_S = 120.0
SATURATED_CHILD_WAITING_AT_LEAST = 4
"""8 streams through the router: the child read 2 running + 6 deferred on one run and stayed
at 2 + 4 for minutes on another (the machine's load was 14), the rest held in front of the
child where no metric counts them; the single-model server always read 2 + 6. So saturated
is recorded once the child reads 2 running and at least 4 deferred."""


def router_models_dir() -> Path:
    """The models dir of every router-mode server: smollm2.gguf and gemma3.gguf symlinks in
    the engine cache (a stable path: the capture's meta lists it)."""
    models = engine_cache() / "router-models"
    models.mkdir(parents=True, exist_ok=True)
    for name, target in (("smollm2.gguf", smollm2_gguf()), ("gemma3.gguf", gemma_gguf())):
        link = models / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return models


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
    gauges: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """state -> smollm2's (running, waiting) read by the driver off its per-model /metrics."""
    autoload_get: dict[str, str] = field(default_factory=dict)
    """Statuses after one `GET /props?model=smollm2` (no autoload) on the all-cold router."""


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


async def _gauge(
    session: aiohttp.ClientSession, url: str, model: str
) -> tuple[float | None, float | None]:
    """The driver's own reading (not the probes under test) of one model's child /metrics."""
    async with session.get(url + per_model_paths(model)[1]) as reply:
        if reply.status != 200:
            return (None, None)
        return LLAMACPP_GAUGE.read(await reply.read())


async def _wait_gauge(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    wanted: tuple[int, int],
    *,
    waiting_at_least: bool = False,
) -> tuple[float | None, float | None]:
    deadline = time.monotonic() + STATE_TIMEOUT_S
    seen: tuple[float | None, float | None] = (None, None)
    while time.monotonic() < deadline:
        seen = await _gauge(session, url, model)
        running, waiting = seen
        if seen == wanted or (
            waiting_at_least and running == wanted[0] and (waiting or 0) >= wanted[1]
        ):
            return seen
        await asyncio.sleep(0.25)
    raise AssertionError(f"{model} never reached (running, waiting) {wanted}; last {seen}")


def _slow(session: aiohttp.ClientSession, url: str, model: str) -> asyncio.Task[None]:
    async def stream() -> None:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": SLOW_PROMPT}],
            "max_tokens": 1500,
            "ignore_eos": True,
            "stream": True,
        }
        async with session.post(url + "/v1/chat/completions", json=body) as reply:
            async for _ in reply.content:
                pass

    return asyncio.create_task(stream())


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
        result.gauges[name] = await _gauge(session, url, "smollm2")
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
    slow: list[asyncio.Task[None]] = []
    try:
        slow += [_slow(session, url, "smollm2") for _ in range(BUSY_REQUESTS)]
        await _wait_gauge(session, url, "smollm2", (2, BUSY_REQUESTS - 2))
        await state("busy")
        slow += [_slow(session, url, "smollm2") for _ in range(SATURATED_REQUESTS - BUSY_REQUESTS)]
        await _wait_gauge(
            session, url, "smollm2", (2, SATURATED_CHILD_WAITING_AT_LEAST), waiting_at_least=True
        )
        await state("saturated")
    finally:
        for task in slow:
            task.cancel()
        await asyncio.gather(*slow, return_exceptions=True)
    await _wait_gauge(session, url, "smollm2", (0, 0))
    await state("cancelled")
    await _chat(session, url, "gemma3")
    await _wait_status(session, url, {"smollm2": "unloaded", "gemma3": "loaded"})
    await state("swapped")
    async with session.post(url + "/models/unload", json={"model": "gemma3"}) as reply:
        await reply.read()
        if reply.status != 200:
            raise AssertionError(f"/models/unload answered {reply.status}")
    await _wait_status(session, url, {m: "unloaded" for m in ROUTER_MODELS})
    await state("unloaded")
    async with session.get(url + "/props?model=smollm2") as reply:  # no autoload=false
        await reply.read()
    result.autoload_get = await _statuses(session, url)
    return result
