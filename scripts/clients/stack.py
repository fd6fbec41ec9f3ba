"""What a client is recorded against: two fake engines, Pharos in front of them with one key,
and the recording sink in front of Pharos, all on 127.0.0.1 in this process (issue 16).

`openai` puts two fake llama.cpp servers behind Pharos (reached at SINK/v1); `ollama` two fake
Ollamas (reached at SINK, the Ollama connection's /api/*). What is recorded is only what the
client sent, but when it sent it depends on how fast the engine answers: Open WebUI is recorded
at speed 1 (a small CPU engine, about 30 s to prefill its first 6,200-token turn) so that its
title call still runs when the turn arrives, as it did in issue 16; at 20x it did not overlap.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from sink import Sink  # scripts/clients/sink.py, beside this file

from pharos.cmd.runtime import Pharos, running
from pharos.config import Backend, Config, Key
from pharos.engine.types import Kind
from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeModel, FakeOllama, scaled_sleep, serve

MODEL = "qwen2.5:0.5b"


@dataclass(frozen=True)
class Stack:
    sink_url: str  # what the client is pointed at
    pharos_url: str
    key: str  # a fresh Pharos key for this recording; never written to the capture
    sink: Sink


def fakes_for(connection: str, speed: float) -> tuple[list[FakeEngine], Kind, dict[str, str]]:
    sleep = scaled_sleep(speed)
    if connection == "ollama":
        return [FakeOllama([FakeModel(MODEL)], sleep=sleep) for _ in range(2)], Kind.OLLAMA, {}
    if connection == "openai":
        alias = {"qwen2.5-0.5b": MODEL}
        return [FakeLlamaCpp(sleep=sleep) for _ in range(2)], Kind.LLAMACPP, alias
    raise ValueError(f"unknown connection {connection!r}: openai or ollama")


@contextlib.asynccontextmanager
async def recording_stack(
    connection: str, out_dir: Path, *, speed: float, skip_paths: tuple[str, ...] = ()
) -> AsyncIterator[Stack]:
    key = "pharos-rec-" + secrets.token_urlsafe(18)
    fakes, kind, alias = fakes_for(connection, speed)
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(f)) for f in fakes]
        config = Config(
            backends=tuple(
                Backend(url=u, kind=kind, aliases=alias, capacity=2, memory_gb=4.0) for u in urls
            ),
            keys=(Key(name="open-webui", sha256=hashlib.sha256(key.encode()).hexdigest()),),
        )
        pharos = Pharos(config)
        pharos_url = await stack.enter_async_context(running(pharos))
        await pharos.wait_ready(10.0)
        sink = Sink(pharos_url, out_dir, skip_paths=skip_paths)
        runner = web.AppRunner(sink.app(), handle_signals=False, access_log=None)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        yield Stack(f"http://127.0.0.1:{port}", pharos_url, key, sink)
