"""`pharos serve` as a subprocess: readiness, SIGTERM drain and the second signal (spec §9)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from pharos.fakeengine import FakeVLLM, no_sleep
from pharos.peer.statefile import read_state_file
from tests.cmd.serve_procs import (
    Gate,
    PharosProcess,
    free_port,
    get_status,
    pharos_process,
    poll_status,
    serve_fake,
    write_config,
)

MODEL = "qwen2.5-0.5b"


def config_text(port: int, backend: str, state_file: Path) -> str:
    return f"""
listen: 127.0.0.1:{port}
backends:
  - url: {backend}
    kind: vllm
state_file: {state_file}
drain:
  grace: 1s
  timeout: 10s
"""


class HeldStream:
    """A streamed chat read in the background; `started` once the first token arrived."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.started = asyncio.Event()
        self.body = b""
        self.task = asyncio.create_task(self._read(session, base))

    async def _read(self, session: aiohttp.ClientSession, base: str) -> int:
        body = {
            "model": MODEL,
            "stream": True,
            "messages": [{"role": "user", "content": "tell me a story"}],
        }
        async with session.post(f"{base}/v1/chat/completions", json=body) as response:
            async for line in response.content:
                self.body += line
                if b'"content"' in line:
                    self.started.set()
            return response.status


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


async def start_serving(tmp_path: Path, backend: str) -> tuple[PharosProcess, str]:
    port = free_port()
    config = write_config(
        tmp_path / "pharos.yaml", config_text(port, backend, tmp_path / "pharos.state")
    )
    process = await PharosProcess.start("serve", "--config", str(config))
    await process.wait_for_line("listening on")
    return process, f"http://127.0.0.1:{port}"


async def test_healthz_waits_for_the_first_round_and_sigterm_drains_a_stream_whole(
    tmp_path: Path, client: aiohttp.ClientSession
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    gate = Gate()
    async with serve_fake(fake, middlewares=[gate.middleware]) as backend:
        process, base = await start_serving(tmp_path, backend)
        try:
            # The engine hasn't answered a single status path: the instance must not be ready.
            assert await get_status(f"{base}/healthz") == 503
            gate.opened.set()
            assert await poll_status(f"{base}/healthz", lambda s: s == 200) == 200

            fake.hold(after_tokens=2)
            stream = HeldStream(client, base)
            async with asyncio.timeout(10):
                await stream.started.wait()

            process.signal(signal.SIGTERM)
            await process.wait_for_line("draining: /healthz answers 503")
            healthz, models = await asyncio.gather(
                get_status(f"{base}/healthz"), get_status(f"{base}/v1/models")
            )
            assert healthz == 503  # the load balancer takes us out ...
            assert models == 200  # ... while requests are still served for drain.grace

            # After the grace the listener closes; the held stream is still open.
            assert await poll_status(f"{base}/healthz", lambda s: s is None) is None
            assert not stream.task.done()
            fake.release()
            async with asyncio.timeout(10):
                assert await stream.task == 200
            assert stream.body.rstrip().endswith(b"data: [DONE]")
            assert await process.wait() == 0
        finally:
            await process.close()
    output = process.output
    assert "stopped" in output
    assert "Traceback" not in output and "Unclosed" not in output
    # The drained stream's usage was counted and saved on the way out.
    snapshot = read_state_file(tmp_path / "pharos.state")
    assert snapshot is not None
    assert sum(cell.completion_tokens for cell in snapshot.cells) > 0


async def test_a_second_signal_exits_at_once_without_waiting_for_streams(
    tmp_path: Path, client: aiohttp.ClientSession
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    async with serve_fake(fake) as backend:
        process, base = await start_serving(tmp_path, backend)
        try:
            assert await poll_status(f"{base}/healthz", lambda s: s == 200) == 200
            fake.hold(after_tokens=1)
            stream = HeldStream(client, base)
            async with asyncio.timeout(10):
                await stream.started.wait()
            process.signal(signal.SIGTERM)
            await process.wait_for_line("draining: /healthz answers 503")
            process.signal(signal.SIGTERM)
            status = await process.wait(timeout_s=5)
            assert status != 0
            assert "second signal" in process.output
            fake.release()
            with pytest.raises(aiohttp.ClientError):
                async with asyncio.timeout(10):
                    await stream.task
        finally:
            await process.close()


async def test_bad_config_names_the_field_and_exits_2(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "pharos.yaml", "backends:\n  - url: http://127.0.0.1:1\n    capcity: 4\n"
    )
    async with pharos_process("serve", "--config", str(config)) as process:
        assert await process.wait() == 2
    assert 'backends[0]: unknown field "capcity" (did you mean "capacity"?)' in process.output
    assert "Traceback" not in process.output


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("drain:\n  grace: soon\n", "drain.grace"),
        ("backends: [\n", "invalid YAML"),
    ],
)
async def test_unusable_config_values_are_named(tmp_path: Path, text: str, says: str) -> None:
    config = write_config(tmp_path / "pharos.yaml", text)
    async with pharos_process("serve", "--config", str(config)) as process:
        assert await process.wait() == 2
    assert says in process.output
    assert "Traceback" not in process.output


async def test_bad_listen_is_a_clear_error() -> None:
    async with pharos_process("serve", "--listen", "localhost", "--discover-ports", "1") as proc:
        assert await proc.wait() == 2
    assert "--listen" in proc.output and "like :8090 or 127.0.0.1:8090" in proc.output
    assert "Traceback" not in proc.output


async def test_a_port_in_use_says_so_and_exits_1() -> None:
    port = free_port()
    server = await asyncio.start_server(lambda _reader, writer: writer.close(), "127.0.0.1", port)
    try:
        async with pharos_process(
            "serve", "--listen", f"127.0.0.1:{port}", "--discover-ports", str(free_port())
        ) as process:
            assert await process.wait() == 1
    finally:
        server.close()
        await server.wait_closed()
    assert f"cannot listen on 127.0.0.1:{port}" in process.output
    assert "address already in use" in process.output
    assert "Traceback" not in process.output and "Unclosed" not in process.output


async def test_a_stop_before_the_restore_leaves_the_state_file_alone(tmp_path: Path) -> None:
    from pharos.peer.statefile import write_state_file
    from pharos.peer.wire import Snapshot
    from pharos.usage import Cell

    saved = Snapshot(cells=[Cell(origin=7, kind=0, bucket=20_000, key="alice", requests=3)])
    write_state_file(tmp_path / "pharos.state", saved)
    before = (tmp_path / "pharos.state").read_bytes()
    gate = Gate()  # never opened: the first scrape round can't finish
    async with serve_fake(FakeVLLM(sleep=no_sleep), middlewares=[gate.middleware]) as backend:
        process, _ = await start_serving(tmp_path, backend)
        try:
            process.signal(signal.SIGTERM)
            assert await process.wait() == 0
        finally:
            gate.opened.set()
            await process.close()
    assert (tmp_path / "pharos.state").read_bytes() == before
