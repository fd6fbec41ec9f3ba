"""Warm restart without peers (spec §12): usage, prefix entries and stats survive a restart
through the state file; a corrupt file is logged and startup goes on empty."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Backend, Config
from pharos.engine.types import Kind
from pharos.fakeengine import FakeVLLM, no_sleep, serve
from pharos.peer.restore import restore_state_file, save_state_file, write_state_periodically
from pharos.peer.statefile import read_state_file
from pharos.proxy.done import RequestDone

MODEL = "qwen2.5-0.5b"
KEY = "anonymous"  # no keys configured


def long_chat() -> dict[str, object]:
    """~6 KiB of conversation: long enough for many prefix blocks."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are terse. " * 40}]
    for turn in range(12):
        messages.append({"role": "user", "content": f"Question {turn}: " + "why is it so? " * 20})
        messages.append({"role": "assistant", "content": f"Answer {turn}: because. " * 10})
    messages.append({"role": "user", "content": "and finally?"})
    return {"model": MODEL, "messages": messages}


class Instance:
    def __init__(self, url: str) -> None:
        self.done: list[RequestDone] = []
        self.pharos = Pharos(
            Config(backends=(Backend(url=url, kind=Kind.VLLM),)),
            options=RuntimeOptions(on_done=self.done.append),
        )


@pytest.fixture
async def engine() -> AsyncIterator[str]:
    async with serve(FakeVLLM(sleep=no_sleep)) as url:
        yield url


async def post_chat(base: str) -> None:
    async with (
        aiohttp.ClientSession() as client,
        client.post(f"{base}/v1/chat/completions", json=long_chat()) as response,
    ):
        assert response.status == 200
        await response.read()


async def test_usage_prefix_entries_and_stats_survive_a_restart(
    tmp_path: Path, engine: str
) -> None:
    path = tmp_path / "pharos.state"
    first = Instance(engine)
    async with running(first.pharos) as base:
        assert await first.pharos.wait_ready(10)
        await post_chat(base)
        tokens_before = first.pharos.usage.tokens_today(KEY)
        assert tokens_before > 0
        assert await save_state_file(first.pharos.shared, path)
    saved = read_state_file(path)
    assert saved is not None and saved.prefix_slices and saved.stats

    second = Instance(engine)
    async with running(second.pharos) as base:
        assert await second.pharos.wait_ready(10)
        assert second.pharos.usage.tokens_today(KEY) == 0
        assert await restore_state_file(second.pharos.shared, path)
        assert second.pharos.usage.tokens_today(KEY) == tokens_before
        restored_keys = {record.key for record in second.pharos.state.export_stats()}
        assert {record.key for record in saved.stats} <= restored_keys
        await post_chat(base)
    (done,) = second.done
    # The same prompt is predicted to hit the engine's cache, from the restored entries.
    assert ("prefix", "predicted_hit") in done.decisions
    assert done.prefix_source == "restored"
    assert done.target_key is not None and done.target_key.startswith(engine)
    assert second.pharos.usage.tokens_today(KEY) > tokens_before


@pytest.mark.parametrize("content", [b"not msgpack at all \xff\x00", b""])
async def test_a_corrupt_state_file_is_logged_and_startup_goes_on_empty(
    tmp_path: Path, engine: str, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    path = tmp_path / "pharos.state"
    path.write_bytes(content)
    instance = Instance(engine)
    async with running(instance.pharos) as base:
        assert await instance.pharos.wait_ready(10)
        with caplog.at_level(logging.ERROR, logger="pharos"):
            assert not await restore_state_file(instance.pharos.shared, path)
        assert "state file not restored, starting empty" in caplog.text
        assert str(path) in caplog.text
        await post_chat(base)
    assert [done.status for done in instance.done] == [200]


async def test_no_state_file_yet_is_not_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    instance = Instance("http://127.0.0.1:9")
    with caplog.at_level(logging.INFO, logger="pharos"):
        assert not await restore_state_file(instance.pharos.shared, tmp_path / "missing.state")
    assert "no state file at" in caplog.text
    assert not any(record.levelno >= logging.ERROR for record in caplog.records)
    await instance.pharos.stop()


async def test_the_state_file_is_written_periodically(tmp_path: Path) -> None:
    path = tmp_path / "pharos.state"
    instance = Instance("http://127.0.0.1:9")
    ticks: list[float] = []
    written = asyncio.Event()

    async def tick(interval_s: float) -> None:
        """The writer's sleep: the second one comes after the first write."""
        ticks.append(interval_s)
        if len(ticks) == 2:
            written.set()
            await asyncio.Event().wait()

    writer = asyncio.create_task(write_state_periodically(instance.pharos.shared, path, sleep=tick))
    try:
        async with asyncio.timeout(10):
            await written.wait()
        assert path.exists()
    finally:
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        await instance.pharos.stop()
    assert read_state_file(path) is not None


async def test_an_unwritable_state_file_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    instance = Instance("http://127.0.0.1:9")
    with caplog.at_level(logging.ERROR, logger="pharos"):
        assert not await save_state_file(
            instance.pharos.shared, tmp_path / "no-such-dir" / "x.state"
        )
    assert "could not write the state file" in caplog.text
    await instance.pharos.stop()
