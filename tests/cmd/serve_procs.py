"""Running the real `pharos` CLI in a subprocess, and fakes with a gated first scrape."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import aiohttp
from aiohttp import web

from pharos.fakeengine import FakeEngine, FakeVLLM, no_sleep, serve

PHAROS = str(Path(sys.executable).parent / "pharos")
WAIT_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PharosProcess:
    """One `pharos` subprocess; its stdout and stderr are collected line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._new_line = asyncio.Event()
        assert process.stdout is not None and process.stderr is not None
        self._readers = [
            asyncio.create_task(self._collect(process.stdout)),
            asyncio.create_task(self._collect(process.stderr)),
        ]

    @classmethod
    async def start(cls, *args: str) -> PharosProcess:
        process = await asyncio.create_subprocess_exec(
            PHAROS,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def _collect(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._new_line.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def wait_for_line(self, text: str, timeout_s: float = WAIT_S) -> str:
        async with asyncio.timeout(timeout_s):
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                if self.process.returncode is not None:
                    raise AssertionError(f"pharos exited before {text!r}:\n{self.output}")
                self._new_line.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await self._new_line.wait()

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def wait(self, timeout_s: float = WAIT_S) -> int:
        async with asyncio.timeout(timeout_s):
            status = await self.process.wait()
            await asyncio.gather(*self._readers)
        return status

    async def close(self) -> None:
        """Kill it if a failed test left it running."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)


@contextlib.asynccontextmanager
async def pharos_process(*args: str) -> AsyncIterator[PharosProcess]:
    process = await PharosProcess.start(*args)
    try:
        yield process
    finally:
        await process.close()


CHAT_BODY = {"model": "qwen2.5-0.5b", "messages": [{"role": "user", "content": "hi"}]}
"""A chat for FakeVLLM's one model."""


@contextlib.asynccontextmanager
async def pharos_before_fake_vllm(
    *flags: str,
) -> AsyncIterator[tuple[PharosProcess, str, str]]:
    """A real `pharos serve` discovering one FakeVLLM, ready and answering /healthz:
    (the process, Pharos's base URL, the engine's URL)."""
    async with serve(FakeVLLM(sleep=no_sleep)) as engine:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        async with pharos_process(
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--discover-ports",
            engine.rsplit(":", 1)[1],
            *flags,
        ) as process:
            await process.wait_for_line("ready: 1 backends")
            assert await poll_status(f"{base}/healthz", lambda s: s == 200) == 200
            yield process, base, engine


async def get_status(url: str) -> int | None:
    """The status of a GET on a fresh connection; None when the connection is refused."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
                await response.read()
                return response.status
        except aiohttp.ClientConnectionError:
            return None


async def poll_status(
    url: str, want: Callable[[int | None], bool], timeout_s: float = WAIT_S
) -> int | None:
    async with asyncio.timeout(timeout_s):
        while True:
            status = await get_status(url)
            if want(status):
                return status
            await asyncio.sleep(0.05)


class Gate:
    """Holds every GET to a fake until opened: the first scrape round can't finish."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()

    @web.middleware
    async def middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if request.method == "GET":
            await self.opened.wait()
        return await handler(request)


@contextlib.asynccontextmanager
async def serve_fake(
    fake: FakeEngine, *, port: int = 0, middlewares: Sequence[object] = ()
) -> AsyncIterator[str]:
    """Like pharos.fakeengine.serve, with extra middlewares (run after the fake's own)."""
    app = fake.app()
    for middleware in middlewares:
        app.middlewares.append(middleware)  # type: ignore[arg-type]
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
