"""`pharos serve` with no config: probe this host's ports, say what answered, serve it."""

from __future__ import annotations

import signal

import aiohttp
import pytest

from pharos.cmd.serve import parse_ports
from pharos.discovery.local import DEFAULT_PORTS, describe_ports, discover_local
from pharos.engine.types import Kind
from pharos.fakeengine import FakeOllama, FakeVLLM, no_sleep, serve
from tests.cmd.serve_procs import free_port, pharos_process, poll_status


async def test_zero_config_finds_an_engine_and_routes_to_it() -> None:
    silent_port = free_port()
    async with serve(FakeVLLM(sleep=no_sleep)) as engine:
        engine_port = int(engine.rsplit(":", 1)[1])
        port = free_port()
        async with pharos_process(
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--discover-ports",
            f"{silent_port},{engine_port}",
        ) as process:
            await process.wait_for_line(f"zero-config: found vllm at {engine}")
            base = f"http://127.0.0.1:{port}"
            assert await poll_status(f"{base}/healthz", lambda s: s == 200) == 200
            async with (
                aiohttp.ClientSession() as client,
                client.get(f"{base}/v1/models") as response,
            ):
                models = [m["id"] for m in (await response.json())["data"]]
            assert models == ["qwen2.5-0.5b"]
            process.signal(signal.SIGTERM)
            assert await process.wait() == 0
    assert "no engine answered" not in process.output
    assert "Traceback" not in process.output


async def test_zero_config_with_nothing_found_still_starts_and_says_how_to_configure() -> None:
    port = free_port()
    async with pharos_process(
        "serve", "--listen", f"127.0.0.1:{port}", "--discover-ports", str(free_port())
    ) as process:
        line = await process.wait_for_line("zero-config: no engine answered")
        assert "pharos serve --config FILE" in line
        base = f"http://127.0.0.1:{port}"
        assert await poll_status(f"{base}/healthz", lambda s: s == 200) == 200
        process.signal(signal.SIGINT)
        assert await process.wait() == 0
    assert "Traceback" not in process.output


async def test_discover_local_tells_kinds_apart_and_skips_silent_ports() -> None:
    async with (
        serve(FakeOllama(sleep=no_sleep)) as ollama,
        serve(FakeVLLM(sleep=no_sleep)) as vllm,
        aiohttp.ClientSession() as session,
    ):
        ports = [int(url.rsplit(":", 1)[1]) for url in (ollama, vllm)]
        found = await discover_local(session, ports=[free_port(), *ports], timeout_s=2.0)
    assert [(spec.url, spec.kind) for spec in found] == [(ollama, Kind.OLLAMA), (vllm, Kind.VLLM)]


def test_ports_parse_and_describe() -> None:
    assert parse_ports("11434, 8080") == (11434, 8080)
    for bad in ("", "x", "0", "70000", "80,"):
        with pytest.raises(ValueError, match="port number"):
            parse_ports(bad)
    assert describe_ports(DEFAULT_PORTS).startswith("Ollama 11434, llama.cpp 8080")
