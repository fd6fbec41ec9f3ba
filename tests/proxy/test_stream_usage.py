"""Usage on every stream (spec §9): Pharos asks for it and strips the usage-only chunk, so the
client gets the engine's stream minus that chunk, byte for byte; a client that asked for
usage gets the stream untouched. Also: aliases rewrite the forwarded model name."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable

import aiohttp
import pytest

from pharos.clock import FakeClock
from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeOllama, FakeVLLM, no_sleep, serve
from tests.proxy.rig import Backend, Interceptor, RigFactory

CHAT = "/v1/chat/completions"

FAKES: dict[str, tuple[Callable[[FakeClock], FakeEngine], str]] = {
    "ollama": (lambda clock: FakeOllama(clock=clock, sleep=no_sleep, seed=7), "qwen2.5:0.5b"),
    "llamacpp": (lambda clock: FakeLlamaCpp(clock=clock, sleep=no_sleep, seed=7), "qwen2.5-0.5b"),
    "vllm": (lambda clock: FakeVLLM(clock=clock, sleep=no_sleep, seed=7), "qwen2.5-0.5b"),
}


def without_usage_chunk(stream: bytes) -> bytes:
    """The stream minus its one usage-only event (`choices` empty) and the blank line ending it."""
    lines = stream.split(b"\n")
    at = [
        i
        for i, line in enumerate(lines)
        if line.startswith(b"data: {") and json.loads(line[6:])["choices"] == []
    ]
    assert len(at) == 1
    return b"\n".join(lines[: at[0]] + lines[at[0] + 2 :])


async def read(session: aiohttp.ClientSession, url: str, body: dict[str, object]) -> bytes:
    async with session.post(url + CHAT, json=body) as response:
        assert response.status == 200
        return await response.read()


@pytest.mark.parametrize("engine", sorted(FAKES))
async def test_the_stream_is_the_engines_minus_the_usage_chunk(
    rig: RigFactory, engine: str
) -> None:
    make, model = FAKES[engine]
    clock = FakeClock()
    behind, direct = make(clock), make(clock)  # same seed, same clock: same bytes
    spy = Interceptor(behind)
    r = await rig(Backend(behind, capacity=2))
    messages = [{"role": "user", "content": "Say hello."}]
    async with contextlib.AsyncExitStack() as stack:
        direct_url = await stack.enter_async_context(serve(direct))
        asked = {
            "model": model,
            "stream": True,
            "messages": messages,
            "stream_options": {"include_usage": True},
        }
        expected = without_usage_chunk(await read(r.client, direct_url, asked))
        got = await read(
            r.client,
            r.base,
            {
                "model": model,
                "stream": True,
                "messages": messages,
                "stream_options": {"continuous_usage_stats": False},
            },
        )
        assert got == expected
        forwarded = json.loads(spy.posted(CHAT)[0])
        assert forwarded["stream_options"] == {
            "continuous_usage_stats": False,
            "include_usage": True,
        }

        # A client that asked for usage gets the stream untouched (its second reply each side).
        untouched = await read(r.client, direct_url, asked)
        assert await read(r.client, r.base, asked) == untouched
        assert spy.posted(CHAT)[1] == json.dumps(asked).encode()
    await r.until_done(2)
    assert [d.decisions[1] for d in r.done] == [
        ("usage", "pharos_asked"),
        ("usage", "client_asked"),
    ]
    assert all(d.metered and d.prompt_tokens and d.completion_tokens for d in r.done)


async def test_a_body_without_stream_options_gets_only_the_key_inserted(rig: RigFactory) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    spy = Interceptor(fake)
    r = await rig(Backend(fake))
    raw = (
        b'{"model": "qwen2.5-0.5b", "stream": true, '
        b'"messages": [{"role": "user", "content": "\\u4f60\\u597d"}]}'
    )
    async with r.client.post(
        r.base + CHAT, data=raw, headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 200
        await response.read()
    assert spy.posted(CHAT) == [b'{"stream_options":{"include_usage":true},' + raw[1:]]


async def test_an_alias_is_rewritten_to_the_engines_name_in_the_forwarded_body(
    rig: RigFactory,
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    spy = Interceptor(fake)
    r = await rig(Backend(fake, aliases={"qwen2.5-0.5b": "team-model"}))
    async with r.client.get(r.base + "/v1/models") as response:
        assert [m["id"] for m in (await response.json())["data"]] == ["team-model"]
    status, reply = await r.chat("team-model", "hi", temperature=0.5)
    assert status == 200, reply
    forwarded = json.loads(spy.posted(CHAT)[0])
    assert forwarded == {
        "model": "qwen2.5-0.5b",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.5,
    }
    assert reply["model"] == "team-model"  # replies carry the client's name (issue 16)
    status, reply = await r.chat("qwen2.5-0.5b", "hi")
    assert status == 404 and reply["error"]["code"] == "model_not_found"
