"""A fake Docker daemon on a unix socket, speaking one API version like Docker 20.10 does.

A path with another version prefix gets the 400 a real 20.10 gives ("client version 1.43 is
too new"), so a client that doesn't negotiate fails here as it would there. Events are pushed
by the test; logs are whatever bytes the test sets (multiplexed frames or raw TTY text).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

CAPTURES = Path(
    os.environ.get(
        "PHAROS_CAPTURES", Path(__file__).resolve().parents[2].parent / "shared/captures"
    )
)
DOCKER_CAPTURES = CAPTURES / "docker"


def captured_containers() -> list[dict[str, Any]]:
    """Docker 29.1.3's GET /containers/json with one labelled Ollama 0.34.4 (pharos-spike)."""
    loaded: list[dict[str, Any]] = json.loads(
        (DOCKER_CAPTURES / "docker-29.1.3-containers.json").read_text()
    )
    return loaded


def captured_events() -> list[bytes]:
    """Docker 29.1.3's events for that container: create, start, kill, stop, die, destroy."""
    lines = (DOCKER_CAPTURES / "docker-29.1.3-events.jsonl").read_bytes().splitlines()
    return [line + b"\n" for line in lines if line.strip()]


def frame(stream: int, payload: bytes) -> bytes:
    """One multiplexed log frame: stream type, three zero bytes, big-endian length."""
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


class FakeDaemon:
    def __init__(self, api_version: str = "1.41") -> None:
        self.api_version = api_version
        self.containers: list[dict[str, Any]] = []
        self.inspected: dict[str, dict[str, Any]] = {}
        self.logs: dict[str, bytes] = {}
        self.list_reply: web.Response | None = None  # a hostile or broken daemon's answer
        self.logs_end = True  # the log stream ends after its bytes (the container stopped)
        self.requests: list[str] = []
        self.queries: list[dict[str, str]] = []
        self.events: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams: set[web.StreamResponse] = set()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/version", self._version)
        app.router.add_get("/{version}/containers/json", self._list)
        app.router.add_get("/{version}/containers/{id}/json", self._inspect)
        app.router.add_get("/{version}/containers/{id}/logs", self._logs)
        app.router.add_get("/{version}/events", self._events)
        return app

    def _check(self, request: web.Request) -> web.Response | None:
        self.requests.append(request.path)
        self.queries.append(dict(request.query))
        asked = request.match_info["version"]
        if asked != f"v{self.api_version}":
            message = (
                f"client version {asked[1:]} is too new. "
                f"Maximum supported API version is {self.api_version}"
            )
            return web.json_response({"message": message}, status=400)
        return None

    async def _version(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        self.queries.append(dict(request.query))
        return web.json_response({"Version": "20.10.24+dfsg1", "ApiVersion": self.api_version})

    async def _list(self, request: web.Request) -> web.Response:
        refused = self._check(request)
        return refused or self.list_reply or web.json_response(self.containers)

    async def _inspect(self, request: web.Request) -> web.Response:
        refused = self._check(request)
        if refused is not None:
            return refused
        found = self.inspected.get(request.match_info["id"])
        if found is None:
            return web.json_response({"message": "No such container"}, status=404)
        return web.json_response(found)

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        refused = self._check(request)
        if refused is not None:
            return refused
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(self.logs.get(request.match_info["id"], b""))
        if not self.logs_end:
            await asyncio.Event().wait()
        return response

    async def _events(self, request: web.Request) -> web.StreamResponse:
        refused = self._check(request)
        if refused is not None:
            return refused
        response = web.StreamResponse()
        await response.prepare(request)
        self._streams.add(response)
        try:
            while (line := await self.events.get()) is not None:
                await response.write(line)
        finally:
            self._streams.discard(response)
        return response


@contextlib.asynccontextmanager
async def fake_daemon(socket: Path, daemon: FakeDaemon) -> AsyncIterator[FakeDaemon]:
    """Serve `daemon` on the unix socket until the block ends (then the socket is gone)."""
    runner = web.AppRunner(daemon.app(), handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.UnixSite(runner, str(socket))
    await site.start()
    try:
        yield daemon
    finally:
        daemon.events.put_nowait(None)
        await runner.cleanup()
        await asyncio.to_thread(socket.unlink, missing_ok=True)
