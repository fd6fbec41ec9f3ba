"""The fakes' synthetic model: caches, hold, kill, loading; and template provenance."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import aiohttp
import pytest
from tools.captures import our_captures as repo_captures_root
from tools.captures import shared_captures as captures_root

from pharos.clock import FakeClock
from pharos.engine.usage import Usage
from pharos.fakeengine import (
    FakeLlamaCpp,
    FakeModel,
    FakeOllama,
    FakeVLLM,
    Ledger,
    no_sleep,
    serve,
)
from pharos.proxy.tap import StreamTap

TEMPLATES = resources.files("pharos.fakeengine") / "templates"
LONG = "The quick brown fox jumps over the lazy dog. " * 40  # 1800 bytes = 450 tokens


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def _chat_usage(session: aiohttp.ClientSession, url: str, model: str, content: str) -> Usage:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tap = StreamTap()
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        assert response.status == 200
        async for chunk in response.content.iter_any():
            tap.feed(chunk)
    usage = tap.finish()[1]
    assert usage is not None
    return usage


FAKES: list[tuple[Any, str]] = [
    (FakeOllama, "qwen2.5:0.5b"),
    (FakeLlamaCpp, "qwen2.5-0.5b"),
    (FakeVLLM, "qwen2.5-0.5b"),
]


@pytest.mark.parametrize(("factory", "model"), FAKES)
async def test_repeat_prompt_is_cached(
    session: aiohttp.ClientSession, factory: Any, model: str
) -> None:
    fake = factory(sleep=no_sleep)
    async with serve(fake) as url:
        first = await _chat_usage(session, url, model, LONG)
        second = await _chat_usage(session, url, model, LONG)
    assert first.prompt_tokens == second.prompt_tokens
    assert first.cached_tokens == 0
    assert second.cached_tokens is not None and second.prompt_tokens is not None
    assert first.prompt_tokens is not None
    assert 0 < second.cached_tokens < second.prompt_tokens  # one token is always computed
    assert fake.counters.prompt_tokens_prefilled == 2 * first.prompt_tokens - second.cached_tokens


async def test_vllm_caches_whole_blocks(session: aiohttp.ClientSession) -> None:
    async with serve(FakeVLLM(sleep=no_sleep)) as url:
        await _chat_usage(session, url, "qwen2.5-0.5b", LONG)
        second = await _chat_usage(session, url, "qwen2.5-0.5b", LONG)
    assert second.cached_tokens is not None
    assert second.cached_tokens % 16 == 0


async def test_tokens_are_decoded_bytes(session: aiohttp.ClientSession) -> None:
    """An escaped and a raw UTF-8 body are the same prompt (4 decoded bytes per token)."""
    text = "héllo wörld, ça va? " * 20
    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]},
                     ensure_ascii=False).encode()  # fmt: skip
    escaped = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    assert raw != escaped
    fake = FakeLlamaCpp(sleep=no_sleep)
    async with serve(fake) as url:
        tokens = []
        for body in (raw, escaped):
            headers = {"Content-Type": "application/json"}
            async with session.post(url + "/v1/chat/completions", data=body, headers=headers) as r:
                tokens.append(json.loads(await r.read())["usage"]["prompt_tokens"])
    expected = -(-len(f"user\n{text}\n".encode()) // 4)
    assert tokens == [expected, expected]


async def test_llamacpp_slot_beside_the_prefix_prefills_in_full(
    session: aiohttp.ClientSession,
) -> None:
    """A request takes the free slot holding its prefix; one beside it gets nothing cached."""
    fake = FakeLlamaCpp(sleep=no_sleep)
    async with serve(fake) as url:
        await _chat_usage(session, url, "m", LONG)
        fake.hold()
        held = asyncio.create_task(_chat_usage(session, url, "m", LONG))
        await fake.until(lambda: fake.running() == 1)
        beside = asyncio.create_task(_chat_usage(session, url, "m", LONG))
        await fake.until(lambda: fake.running() == 2)
        fake.release()
        first, second = await held, await beside
    assert first.cached_tokens is not None and first.cached_tokens > 0
    assert second.cached_tokens == 0


async def test_hold_keeps_requests_running_and_queues_the_rest(
    session: aiohttp.ClientSession,
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    async with serve(fake) as url:
        fake.hold()
        tasks = [
            asyncio.create_task(_chat_usage(session, url, "qwen2.5-0.5b", f"q{i}"))
            for i in range(3)
        ]
        await fake.until(lambda: fake.running() + fake.waiting() == 3)
        async with session.get(url + "/metrics") as response:
            metrics = await response.text()
        assert 'vllm:num_requests_running{engine="0",model_name="qwen2.5-0.5b"} 2.0' in metrics
        assert 'vllm:num_requests_waiting{engine="0",model_name="qwen2.5-0.5b"} 1.0' in metrics
        assert not any(task.done() for task in tasks)
        fake.release()
        usages = await asyncio.gather(*tasks)
    assert all(u.completion_tokens == 10 for u in usages)
    assert fake.running() == fake.waiting() == 0


async def test_kill_cuts_the_stream_mid_reply(session: aiohttp.ClientSession) -> None:
    fake = FakeOllama(sleep=no_sleep)
    async with serve(fake) as url:
        fake.hold(after_tokens=3)
        body = {"model": "qwen2.5:0.5b", "messages": [{"role": "user", "content": "hi"}],
                "stream": True}  # fmt: skip
        received = b""
        with pytest.raises(aiohttp.ClientPayloadError):
            async with session.post(url + "/v1/chat/completions", json=body) as response:
                async for chunk in response.content.iter_any():
                    received += chunk
                    if received.count(b"data: ") >= 3:
                        await fake.kill()
        assert b"[DONE]" not in received
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(url + "/api/version")


async def test_ollama_loads_cold_and_unloads_lru_under_memory() -> None:
    clock = FakeClock()
    big = [FakeModel(name, 1, 6 * 10**9) for name in ("a", "b", "c")]
    fake = FakeOllama(big, sleep=no_sleep, clock=clock, ledger=Ledger(memory_bytes=13 * 10**9))
    async with serve(fake) as url, aiohttp.ClientSession() as session:
        for name in ("a", "b", "a", "c"):
            clock.advance(1)
            body = {"model": name, "messages": [{"role": "user", "content": "x"}], "stream": False}
            async with session.post(url + "/api/chat", json=body) as response:
                final = json.loads(await response.read())
            assert response.status == 200
        assert fake.counters.loads == 3
        assert set(fake.loaded()) == {"a", "c"}  # b was least recently used
        assert final["load_duration"] == 8 * 10**9  # c was cold
        clock.advance(Ledger().keep_alive_s)
        async with session.get(url + "/api/ps") as response:
            assert json.loads(await response.read()) == {"models": []}


def test_ledger_is_injectable_and_charged() -> None:
    ledger = Ledger(prefill_s_per_token=0.5, decode_s_per_token=0.0, load_s=0.0)

    async def one() -> float:
        fake = FakeVLLM(sleep=no_sleep, ledger=ledger)
        async with fake.generation(fake.model, b"x" * 40, 1) as gen:
            await fake.run(gen)
        return fake.counters.slept_s

    assert asyncio.run(one()) == pytest.approx(10 * 0.5)


def _sources() -> list[list[str]]:
    rows = (TEMPLATES / "SOURCES.tsv").read_text().splitlines()[1:]
    return [row.split("\t") for row in rows]


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return "*"


@pytest.mark.skipif(not (captures_root() / "engines").is_dir(), reason="no captures")
@pytest.mark.parametrize("row", _sources(), ids=lambda row: row[0])
def test_template_matches_its_capture(row: list[str]) -> None:
    template_name, capture_name, how = row
    template = (TEMPLATES / template_name).read_bytes()
    if capture_name.startswith("repo:"):  # recorded here, under tests/captures
        capture = (repo_captures_root() / capture_name.removeprefix("repo:")).read_bytes()
    else:
        capture = (captures_root() / "engines" / capture_name).read_bytes()
    if how.startswith("verbatim"):
        assert template == capture
    elif template_name.endswith("metrics"):
        assert set(template.splitlines()) <= set(capture.splitlines())
        assert any(line.startswith(b"vllm:num_requests_waiting{") for line in template.splitlines())
    else:
        assert _shape(json.loads(template)) == _shape(json.loads(capture))
