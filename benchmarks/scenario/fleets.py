"""The llama-servers a run starts: b11312 from the live tests' build (the engine cache), fresh
for every policy so every policy starts with cold caches.

- equal: two engines, one thread each (the issue's first table);
- bypass: the same, and a client that sends straight to engine 0 (Pharos can't see it);
- speed: engines that differ in speed, two threads against one (the machine has 2 cores);
- models: two router-mode servers (`--models-dir`, `--models-max 1`) holding smollm2 and
  gemma3 between them: the two models don't both fit one server, so a turn for the model a
  server does not hold makes it swap;
- fake: two of Pharos's own llama.cpp fakes in this process (no engines needed; what CI's
  smoke test runs: it shows the tool works, its numbers mean nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from tests.live.engines import (
    SERVED_MODEL,
    SLOTS,
    RunningEngine,
    free_port,
    gemma_gguf,
    llama_server_binary,
    require,
    smollm2_gguf,
    start_llamacpp,
    wait_healthy,
)
from tests.live.router import ROUTER_MODELS, router_models_dir

from pharos.engine.types import Kind
from pharos.fakeengine import FakeLlamaCpp, serve

CONTEXT_TOKENS = 4096  # -c: SLOTS slots of 2,048 each, as the live tests run it
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Fleet:
    name: str
    threads: tuple[int, ...]  # llama-server -t, per engine
    bypass: bool = False
    router: bool = False  # router mode over smollm2 + gemma3, --models-max 1
    fake: bool = False  # pharos.fakeengine's llama.cpp, in-process
    about: str = ""

    @property
    def models(self) -> tuple[str, ...]:
        return ROUTER_MODELS if self.router else (SERVED_MODEL,)


FLEETS = {
    fleet.name: fleet
    for fleet in (
        Fleet("equal", (1, 1), about="two equal engines, 1 thread each"),
        Fleet("bypass", (1, 1), bypass=True, about="as equal, plus a client on engine 0 only"),
        Fleet("speed", (2, 1), about="engine 0 has 2 threads, engine 1 has 1"),
        Fleet(
            "models",
            (1, 1),
            router=True,
            about="two router-mode servers, smollm2 + gemma3, --models-max 1",
        ),
        Fleet("fake", (1, 1), fake=True, about="two in-process llama.cpp fakes (a smoke test)"),
    )
}


def check_installed(fleet: Fleet) -> None:
    """Raise EngineMissing, naming the install script, before any engine is started."""
    if fleet.fake:
        return
    require([llama_server_binary()], "install-llamacpp.sh")
    require([smollm2_gguf()] + ([gemma_gguf()] if fleet.router else []), "fetch-models.sh")


def _start_router(log_dir: Path, name: str, threads: int) -> RunningEngine:
    port = free_port()
    argv = (
        str(llama_server_binary()),
        "--models-dir", str(router_models_dir()),
        "--models-max", "1",
        "--metrics", "--slots",
        "-np", str(SLOTS), "-c", str(CONTEXT_TOKENS), "-t", str(threads),
        "--no-webui",
        "--host", "127.0.0.1", "--port", str(port),
    )  # fmt: skip
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    engine = RunningEngine(
        name=name,
        kind=Kind.LLAMACPP,
        base_url=f"http://127.0.0.1:{port}",
        model="",
        log_path=log_path,
        process=process,
        argv=argv,
    )
    try:
        wait_healthy(engine, timeout_s=START_TIMEOUT_S)
    except BaseException:
        engine.stop()
        raise
    return engine


def _start_engines(fleet: Fleet, log_dir: Path, tag: str) -> list[RunningEngine]:
    """One after another (two starting at once fight for the cores), blocking: nothing else
    runs yet, and a SIGTERM that lands while an engine starts stops that engine too (run in
    a thread, an engine started after the signal was left running)."""
    engines: list[RunningEngine] = []
    try:
        for index, threads in enumerate(fleet.threads):
            name = f"{tag}-e{index}"
            if fleet.router:
                engines.append(_start_router(log_dir, name, threads))
            else:
                engines.append(start_llamacpp(log_dir, name=name, threads=threads))
    except BaseException:
        _stop_all(engines)
        raise
    return engines


ROUTER_LOAD_LINE = b"load_model: loading model"
"""What a b11312 router's child logs once per model load (captured in logs of this tool)."""


def model_loads(fleet: Fleet, log_dir: Path, tag: str) -> int | None:
    """Model loads the routers logged during one policy's run; None when not a router fleet."""
    if not fleet.router:
        return None
    logs = [log_dir / f"{tag}-e{index}.log" for index in range(len(fleet.threads))]
    return sum(path.read_bytes().count(ROUTER_LOAD_LINE) for path in logs if path.exists())


def _stop_all(engines: list[RunningEngine]) -> None:
    for engine in engines:
        engine.stop()


@contextlib.asynccontextmanager
async def fleet_running(fleet: Fleet, log_dir: Path, tag: str) -> AsyncIterator[list[str]]:
    """Start the fleet, yield its base URLs (engine 0 first), stop it."""
    if fleet.fake:
        async with contextlib.AsyncExitStack() as stack:
            bases = [
                await stack.enter_async_context(serve(FakeLlamaCpp(SERVED_MODEL, seed=index)))
                for index in range(len(fleet.threads))
            ]
            yield bases
        return
    engines = _start_engines(fleet, log_dir, tag)
    try:
        yield [e.base_url for e in engines]
    finally:
        await asyncio.to_thread(_stop_all, engines)
