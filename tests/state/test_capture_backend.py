"""State with the real pharos.engine against an aiohttp server on 127.0.0.1 serving Ollama
0.34.4 bodies (captures/engines/ollama/v0.34.4), and its real engine.log as a file feed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from pharos.clock import FakeClock
from pharos.discovery import open_file_feed
from pharos.engine.types import Kind, Residency
from pharos.state import BackendSpec, State

CAPTURES = Path(
    os.environ.get("PHAROS_CAPTURES", Path(__file__).resolve().parents[2] / "../shared/captures")
)
OLLAMA = CAPTURES / "engines/ollama/v0.34.4"
MODEL = "qwen2.5:0.5b"


def _bodies() -> dict[str, bytes]:
    """One whole state assembled from files that exist: version and tags were recorded only
    in idle (the same in every state), /api/ps and /v1/models in loaded and busy."""
    return {
        "/api/version": (OLLAMA / "idle/api_version").read_bytes(),
        "/api/tags": (OLLAMA / "idle/api_tags").read_bytes(),
        "/api/ps": (OLLAMA / "loaded/api_ps").read_bytes(),
        "/v1/models": (OLLAMA / "busy/v1_models").read_bytes(),
    }


pytestmark = pytest.mark.skipif(not OLLAMA.is_dir(), reason="captures not found")


async def test_ollama_capture_end_to_end(aiohttp_server: Callable[..., Any]) -> None:
    bodies = _bodies()

    async def handler(request: web.Request) -> web.Response:
        body = bodies.get(request.path)
        if body is None:
            return web.Response(status=404, text="404 page not found")
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    server = await aiohttp_server(app, host="127.0.0.1", port=0)
    url = str(server.make_url("")).rstrip("/")

    capacities: list[int | None] = []
    holder: dict[str, State] = {}

    async def sleep(_delay_s: float) -> None:  # the feed reached the end of the file
        (view,) = holder["state"].targets_for_model(MODEL, clock.now())
        capacities.append(view.capacity)
        raise RuntimeError("stop following")

    async def opener(feed_url: str) -> Any:
        return await open_file_feed(feed_url, sleep=sleep)

    clock = FakeClock()
    decisions: list[tuple[str, str, str]] = []
    async with aiohttp.ClientSession() as session:
        state = State(
            clock,
            session,
            on_decision=lambda *d: decisions.append(d),
            open_log_feed=opener,
        )
        holder["state"] = state
        state.set_backends(
            [BackendSpec(url=url, log_feed=(OLLAMA / "engine.log").as_uri(), memory_bytes=8 << 30)]
        )
        await state.run_round(url)
        assert state.ready
        (view,) = state.targets_for_model(MODEL, clock.now())
        assert view.kind is Kind.OLLAMA
        assert view.residency is Residency.LOADED
        assert view.size_bytes == 397821319  # /api/tags size
        assert view.capacity is None  # Ollama serves no capacity; its log line does
        (status,) = state.backends()
        assert status.version == "0.34.4"
        assert "ollama-log-num-parallel" in status.active_probes
        assert status.log_feed_up is False  # not following yet

        assert await state.run_log_session(url) is True
        assert capacities == [2]  # OLLAMA_NUM_PARALLEL:2 in the server config line
        (view,) = state.targets_for_model(MODEL, clock.now())
        assert view.capacity is None  # the feed dropped

        bodies["/api/ps"] = b'{"models":[]}'  # the model was unloaded
        for _ in range(5):
            clock.advance(1.0)
            await state.run_round(url)
        (view,) = state.targets_for_model(MODEL, clock.now())
        assert view.residency is Residency.COLD
        assert view.generation == 1
        assert (url, "generation", "unloaded") in decisions
        await state.stop()
    await asyncio.sleep(0)
