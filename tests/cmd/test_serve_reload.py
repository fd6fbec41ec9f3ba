"""Hot reload (spec §10), one step at a time: `reload_config` and `reload_if_changed`."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from pharos.cmd.runtime import Pharos, running
from pharos.config import load_config
from pharos.config.watch import reload_config, reload_if_changed, watch_config
from pharos.fakeengine import FakeVLLM, no_sleep, serve
from pharos.proxy.auth import hash_key

MODEL = "qwen2.5-0.5b"
ALICE = "pk-alice-test-key"
BOB = "pk-bob-test-key"


def config_text(
    *backends: str,
    keys: tuple[tuple[str, str], ...] = (("alice", ALICE),),
    listen: str = "127.0.0.1:8090",
) -> str:
    lines = [f"listen: {listen}", "backends:"]
    lines += [f"  - url: {url}\n    kind: vllm" for url in backends]
    if not backends:
        lines[-1] = "backends: []"
    lines.append("keys:")
    lines += [f"  - name: {name}\n    sha256: {hash_key(key)}" for name, key in keys]
    return "\n".join(lines) + "\n"


def chat(stream: bool = False) -> dict[str, object]:
    return {
        "model": MODEL,
        "stream": stream,
        "messages": [{"role": "user", "content": "hello there"}],
    }


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
        yield session


@pytest.fixture
async def engine() -> AsyncIterator[tuple[FakeVLLM, str]]:
    fake = FakeVLLM(sleep=no_sleep)
    async with serve(fake) as url:
        yield fake, url


async def started(path: Path) -> Pharos:
    return Pharos(load_config(path))


async def test_a_reload_adds_a_key(
    tmp_path: Path, engine: tuple[FakeVLLM, str], client: aiohttp.ClientSession
) -> None:
    _, url = engine
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text(url))
    pharos = await started(path)
    async with running(pharos) as base:
        assert await pharos.wait_ready(10)
        endpoint = f"{base}/v1/chat/completions"
        async with client.post(endpoint, json=chat(), headers=auth(BOB)) as response:
            assert response.status == 401
        path.write_text(config_text(url, keys=(("alice", ALICE), ("bob", BOB))))
        assert await reload_config(pharos, path)
        async with client.post(endpoint, json=chat(), headers=auth(BOB)) as response:
            assert response.status == 200
            assert (await response.json())["choices"][0]["message"]["content"]
        path.write_text(config_text(url, keys=(("bob", BOB),)))
        assert await reload_config(pharos, path)
        async with client.post(endpoint, json=chat(), headers=auth(ALICE)) as response:
            assert response.status == 401


async def test_removing_a_backend_lets_its_stream_in_flight_finish(
    tmp_path: Path, engine: tuple[FakeVLLM, str], client: aiohttp.ClientSession
) -> None:
    fake, url = engine
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text(url))
    pharos = await started(path)
    other = FakeVLLM(sleep=no_sleep)
    async with serve(other) as other_url, running(pharos) as base:
        assert await pharos.wait_ready(10)
        fake.hold(after_tokens=2)
        first_token = asyncio.Event()

        async def stream() -> bytes:
            body = b""
            async with client.post(
                f"{base}/v1/chat/completions", json=chat(stream=True), headers=auth(ALICE)
            ) as response:
                assert response.status == 200
                async for line in response.content:
                    body += line
                    if b'"content"' in line:
                        first_token.set()
            return body

        task = asyncio.create_task(stream())
        async with asyncio.timeout(10):
            await first_token.wait()
        path.write_text(config_text(other_url))
        assert await reload_config(pharos, path)
        draining = {status.url: status.draining for status in pharos.state.backends()}
        assert draining == {other_url: False, url: True}
        fake.release()
        async with asyncio.timeout(10):
            body = await task
    assert body.rstrip().endswith(b"data: [DONE]")
    assert body.count(b'"content"') >= 9  # every token of the recorded reply
    assert fake.counters.completion_tokens > 2


async def test_a_file_that_does_not_parse_is_logged_and_the_running_config_stays(
    tmp_path: Path,
    engine: tuple[FakeVLLM, str],
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, url = engine
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text(url))
    pharos = await started(path)
    running_config = pharos.config
    async with running(pharos) as base:
        assert await pharos.wait_ready(10)
        for broken in ("keys: [\n", config_text(url) + "polcy: cost\n"):
            path.write_text(broken)
            with caplog.at_level(logging.ERROR, logger="pharos"):
                assert not await reload_config(pharos, path)
            assert "config reload failed; the running config stays" in caplog.text
            assert pharos.config is running_config
        assert 'unknown field "polcy" (did you mean "policy"?)' in caplog.text
        async with client.post(
            f"{base}/v1/chat/completions", json=chat(), headers=auth(ALICE)
        ) as response:
            assert response.status == 200


async def test_a_changed_listen_is_logged_as_needing_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text())
    pharos = await started(path)
    path.write_text(config_text(listen="127.0.0.1:9999"))
    with caplog.at_level(logging.WARNING, logger="pharos"):
        assert await reload_config(pharos, path)
    assert "`listen` changed and needs a restart" in caplog.text
    assert "`policy`" not in caplog.text
    await pharos.stop()


async def test_the_watcher_reloads_only_when_the_modification_time_moves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text())
    pharos = await started(path)
    seen = path.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="pharos"):
        assert await reload_if_changed(pharos, path, seen) == seen
        assert "config reloaded" not in caplog.text
        path.write_text(config_text(keys=(("bob", BOB),)))
        os.utime(path, ns=(seen + 1_000_000_000, seen + 1_000_000_000))
        assert await reload_if_changed(pharos, path, seen) == seen + 1_000_000_000
    assert "config reloaded: 1 keys" in caplog.text
    assert [key.name for key in pharos.keys.entries] == ["bob"]
    path.unlink()
    assert await reload_if_changed(pharos, path, seen) == seen  # a vanished file keeps all
    await pharos.stop()


async def test_the_watcher_survives_an_unexpected_error_and_keeps_watching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text())
    pharos = await started(path)
    polls: list[int] = []

    async def flaky_reload(*_args: object) -> int | None:
        polls.append(len(polls))
        if len(polls) == 1:
            raise RuntimeError("a bug in a reload step")
        return None

    async def three_ticks(_interval_s: float) -> None:
        if len(polls) == 3:
            raise asyncio.CancelledError
        await asyncio.sleep(0)

    monkeypatch.setattr("pharos.config.watch.reload_if_changed", flaky_reload)
    with caplog.at_level(logging.ERROR, logger="pharos"), pytest.raises(asyncio.CancelledError):
        await watch_config(pharos, path, sleep=three_ticks)
    assert polls == [0, 1, 2]  # the error on the first poll did not end the loop
    assert "config reload failed" in caplog.text
    await pharos.stop()


VALID = config_text("http://127.0.0.1:9")

# what the watcher may read, with alice's key running: each was applied before (issue 11)
NARROWING_ONLY = [
    "",  # an editor truncated the file before writing it
    "# nothing yet\n\n",
    VALID[: VALID.index("keys:")],  # a valid file caught mid-write, before its keys
    "backends: []\nkeys: []\n",
]


@pytest.mark.parametrize("text", NARROWING_ONLY)
async def test_a_reload_that_would_drop_every_key_is_refused(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text("http://127.0.0.1:9"))
    pharos = await started(path)
    running_config = pharos.config
    path.write_text(text)
    with caplog.at_level(logging.ERROR, logger="pharos"):
        assert not await reload_config(pharos, path)
    assert "the running config stays" in caplog.text
    assert pharos.config is running_config
    assert not pharos.keys.is_open
    assert [key.name for key in pharos.keys.entries] == ["alice"]
    await pharos.stop()


async def test_dropping_every_key_on_purpose_needs_the_explicit_setting(tmp_path: Path) -> None:
    path = tmp_path / "pharos.yaml"
    path.write_text(config_text("http://127.0.0.1:9"))
    pharos = await started(path)
    path.write_text(VALID[: VALID.index("keys:")] + "allow_dropping_keys: true\n")
    assert await reload_config(pharos, path)
    assert pharos.keys.is_open
    await pharos.stop()
