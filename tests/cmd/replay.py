"""Replay servers for the cmd tests: recorded engine bodies served on 127.0.0.1.

The server runs on its own event loop in a thread, so a test can call the real
CLI entry point (which runs its own `asyncio.run`) against it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

REPO_ROOT = Path(__file__).resolve().parents[2]


def captures_dir() -> Path:
    return Path(os.environ.get("PHAROS_CAPTURES", REPO_ROOT.parent / "shared" / "captures"))


def capture(relative: str) -> bytes:
    """One recorded body, read in place: `engines/<engine>/<version>/<state>/<file>`."""
    path = captures_dir() / relative
    if not path.is_file():
        pytest.skip(f"capture {path} is missing (set PHAROS_CAPTURES)")
    return path.read_bytes()


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"


Routes = Mapping[tuple[str, str], Reply]  # (method, path) -> reply; anything else is 404


def _app(routes: Routes) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        reply = routes.get((request.method, request.path))
        if reply is None:
            return web.Response(status=404, text="404 page not found", content_type="text/plain")
        return web.Response(status=reply.status, body=reply.body, content_type=reply.content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


class ReplayServer:
    """An aiohttp server on 127.0.0.1:<free port>, running in a background thread."""

    def __init__(self, routes: Routes) -> None:
        self._routes = routes
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    async def _start(self) -> None:
        self._runner = web.AppRunner(_app(self._routes))
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


SYNTHETIC_VLLM_VERSION = b'{"version":"0.30.0"}'
"""SYNTHETIC: no /version body of vLLM v0.30.0 survived in the captures (paths.tsv of
v0.10.2 shows /version answers 200 application/json); this is its shape per ENGINE-FACTS."""


def vllm_busy_routes() -> dict[tuple[str, str], Reply]:
    """vLLM v0.30.0 `busy` (2 running, 2 waiting): /metrics and /v1/models recorded, /version
    synthetic. Every other path 404s, as vLLM's paths.tsv (v0.10.2) records."""
    return {
        ("GET", "/version"): Reply(200, SYNTHETIC_VLLM_VERSION),
        ("GET", "/metrics"): Reply(200, capture("engines/vllm/v0.30.0/busy/metrics"), "text/plain"),
        ("GET", "/v1/models"): Reply(200, capture("engines/vllm/v0.30.0/busy/v1_models")),
        ("GET", "/health"): Reply(200, b"", "text/plain"),
    }


SYNTHETIC_BAD_REQUEST = b'{"error":"synthetic: a POST {} names no model"}'
"""SYNTHETIC: ENGINE-FACTS says Ollama serves /v1/messages and /v1/responses (0.32.15); no
reply body was recorded, so the 400 here only stands in for "this route is served"."""


def ollama_loaded_routes() -> dict[tuple[str, str], Reply]:
    """Ollama v0.34.4 `loaded`. /api/ps is loaded's own; /api/version and /api/tags exist only
    under idle/ and /v1/models only under busy/ (identical bodies were stored once, MANIFEST)."""
    return {
        ("GET", "/api/version"): Reply(200, capture("engines/ollama/v0.34.4/idle/api_version")),
        ("GET", "/api/ps"): Reply(200, capture("engines/ollama/v0.34.4/loaded/api_ps")),
        ("GET", "/api/tags"): Reply(200, capture("engines/ollama/v0.34.4/idle/api_tags")),
        ("GET", "/v1/models"): Reply(200, capture("engines/ollama/v0.34.4/busy/v1_models")),
        ("POST", "/v1/messages"): Reply(400, SYNTHETIC_BAD_REQUEST),
        ("POST", "/v1/responses"): Reply(400, SYNTHETIC_BAD_REQUEST),
    }


def ollama_log_path() -> Path:
    path = captures_dir() / "engines/ollama/v0.34.4/engine.log"
    if not path.is_file():
        pytest.skip(f"capture {path} is missing (set PHAROS_CAPTURES)")
    return path
