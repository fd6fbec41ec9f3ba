"""What `pharos serve` logs, as a real process: startup lines naming each backend's kind and
version, the keys and the policy; one access line per request unless --no-access-log."""

from __future__ import annotations

import signal

import aiohttp
import pytest

from tests.cmd.serve_procs import CHAT_BODY, pharos_before_fake_vllm


async def served_requests(*flags: str) -> str:
    async with pharos_before_fake_vllm(*flags) as (process, base, engine):
        async with aiohttp.ClientSession() as client:
            for _ in range(2):
                async with client.post(f"{base}/v1/chat/completions", json=CHAT_BODY) as reply:
                    assert reply.status == 200
                    assert reply.headers["X-Request-Id"]
        process.signal(signal.SIGTERM)
        assert await process.wait() == 0
        line = f"backend {engine}: vllm 0.30.0, up, 1 models"
        assert line in process.output, process.output
        assert "policy cost, no keys" in process.output
    assert "Traceback" not in process.output
    return process.output


async def test_serve_logs_startup_and_one_access_line_per_request() -> None:
    output = await served_requests()
    access = [line for line in output.splitlines() if "logger=pharos.access" in line]
    assert len(access) == 2, output
    assert all("method=POST path=/v1/chat/completions route=chat" in line for line in access)
    assert "scrape=ok" not in output


async def test_no_access_log_leaves_the_lines_out() -> None:
    output = await served_requests("--no-access-log")
    assert "logger=pharos.access" not in output


async def test_serve_says_when_routing_runs_the_pure_python_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PHAROS_PURE_PYTHON", "1")  # the subprocess inherits it
    output = await served_requests()
    assert "routing runs its pure-Python build: PHAROS_PURE_PYTHON=1" in output
