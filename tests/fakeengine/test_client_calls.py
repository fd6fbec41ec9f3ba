"""Every client call a user tries against the demo behaves like a real engine: the fakes
stream /v1/completions in the shape each engine recorded (tests/captures/routes), and the
fake Ollama serves the older /api/embeddings the ollama SDK's `embeddings()` calls."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import ollama
import openai
import pytest
from tools.captures import our_captures as repo_captures_root
from tools.captures import shared_captures as captures_root

from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeOllama, FakeVLLM, no_sleep, serve
from tests.fakeengine.test_replies import line_shapes

ROUTES = repo_captures_root() / "routes"
OPEN_WEBUI = captures_root() / "clients/open-webui/v0.11.4-openai"


@pytest.fixture
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[FakeEngine, str]]:
    fake: FakeEngine = request.param(sleep=no_sleep)
    async with serve(fake) as url:
        yield fake, url


def _model(fake: FakeEngine) -> str:
    return next(iter(fake.models))


# fake, whether its stream carries usage without being asked (llama.cpp: always, recorded)
CASES: list[tuple[Any, bool]] = [(FakeLlamaCpp, True), (FakeVLLM, False), (FakeOllama, False)]


@pytest.mark.parametrize(("served", "usage_unasked"), CASES, indirect=["served"])
async def test_a_streamed_completion_is_the_whole_reply_in_chunks(
    served: tuple[FakeEngine, str], usage_unasked: bool
) -> None:
    fake, url = served
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as client:
        whole = await client.completions.create(model=_model(fake), prompt="Once", max_tokens=5)
        stream = await client.completions.create(
            model=_model(fake), prompt="Once", max_tokens=5, stream=True
        )
        chunks = [chunk async for chunk in stream]
        asked = await client.completions.create(
            model=_model(fake),
            prompt="Once",
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
        )
        asked_chunks = [chunk async for chunk in asked]
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text and len(text) > 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert any(c.usage is not None for c in chunks) is usage_unasked
    usage = [c.usage for c in asked_chunks if c.usage is not None]
    assert usage and usage[-1].completion_tokens == 5 and usage[-1].prompt_tokens > 0


@pytest.mark.parametrize(
    ("fake_type", "recorded"),
    [
        (FakeLlamaCpp, "llamacpp/b11312/streams/openai-completion.sse"),
        (FakeVLLM, "vllm/v0.32.0/streams/openai-completion.usage.sse"),
    ],
)
async def test_the_completion_stream_has_the_recorded_line_shapes(
    fake_type: Any, recorded: str
) -> None:
    fake = fake_type(sleep=no_sleep)
    want = line_shapes((ROUTES / recorded).read_bytes())
    async with serve(fake) as url, aiohttp.ClientSession() as session:
        body = {"model": _model(fake), "prompt": "Once", "max_tokens": 4, "stream": True}
        body["stream_options"] = {"include_usage": True}
        async with session.post(url + "/v1/completions", json=body) as reply:
            got = line_shapes(await reply.read())
    assert got == want


@pytest.mark.parametrize("served", [FakeOllama], indirect=True)
async def test_the_ollama_sdk_embeddings_call_gets_a_vector(served: tuple[FakeEngine, str]) -> None:
    fake, url = served
    reply = await ollama.AsyncClient(host=url).embeddings(model="all-minilm:22m", prompt="a")
    again = await ollama.AsyncClient(host=url).embeddings(model="all-minilm:22m", prompt="a")
    assert len(reply.embedding) == fake.ledger.embedding_dims
    assert list(reply.embedding) == list(again.embedding)  # a vector of the text, every time
    with pytest.raises(ollama.ResponseError) as missing:
        await ollama.AsyncClient(host=url).embeddings(model="no-such", prompt="a")
    assert missing.value.status_code == 404


def _open_webui_body(name: str) -> dict[str, Any]:
    recorded = json.loads((OPEN_WEBUI / name).read_text())
    body: dict[str, Any] = json.loads(recorded["body"])
    return body


# recorded Open WebUI side request -> the JSON key its reply must have, and that key's type
SIDE_REQUESTS = [("002.json", "title", str), ("010.json", "follow_ups", list)]


@pytest.mark.skipif(not OPEN_WEBUI.is_dir(), reason=f"no captures at {OPEN_WEBUI}")
@pytest.mark.parametrize(("name", "key", "kind"), SIDE_REQUESTS)
@pytest.mark.parametrize("fake_type", [FakeLlamaCpp, FakeVLLM, FakeOllama])
async def test_open_webui_side_requests_get_short_valid_json(
    fake_type: Any, name: str, key: str, kind: type
) -> None:
    fake = fake_type(sleep=no_sleep)
    body = _open_webui_body(name)
    body["model"] = _model(fake)
    async with (
        serve(fake) as url,
        aiohttp.ClientSession() as session,
        session.post(url + "/v1/chat/completions", json=body) as reply,
    ):
        answer = await reply.json()
    content = answer["choices"][0]["message"]["content"]
    assert isinstance(json.loads(content)[key], kind)
    assert answer["choices"][0]["finish_reason"] == "stop"
    # It stopped by itself: far below the 1000 tokens the title call allows (31 s before).
    assert fake.counters.completion_tokens < 40
    assert fake.counters.slept_s < 40 * fake.ledger.decode_s_per_token + 60


# request extras -> JSON expected
JSON_ASKS = [
    ({"response_format": {"type": "json_object"}}, True),
    ({"response_format": {"type": "text"}}, False),
    ({}, False),
]


@pytest.mark.parametrize(("extra", "is_json"), JSON_ASKS)
async def test_response_format_json_gets_json_and_plain_gets_the_recorded_words(
    extra: dict[str, Any], is_json: bool
) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    body = {"model": _model(fake), "messages": [{"role": "user", "content": "hi"}], **extra}
    async with (
        serve(fake) as url,
        aiohttp.ClientSession() as session,
        session.post(url + "/v1/chat/completions", json=body) as reply,
    ):
        content = (await reply.json())["choices"][0]["message"]["content"]
    if is_json:
        assert isinstance(json.loads(content), dict)
    else:
        assert content == "Hello! How can I assist you today?"


async def test_a_generous_max_tokens_still_stops_at_the_natural_end() -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    async with (
        serve(fake) as url,
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as c,
    ):
        long = await c.chat.completions.create(
            model=_model(fake), messages=[{"role": "user", "content": "hi"}], max_tokens=1000
        )
        short = await c.chat.completions.create(
            model=_model(fake), messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
    assert long.choices[0].finish_reason == "stop"
    assert long.choices[0].message.content == "Hello! How can I assist you today?"
    assert long.usage is not None and long.usage.completion_tokens == 10  # as recorded
    assert short.choices[0].finish_reason == "length"
    assert short.usage is not None and short.usage.completion_tokens == 3


@pytest.mark.parametrize("fake_type", [FakeOllama, FakeLlamaCpp, FakeVLLM])
async def test_a_client_leaving_mid_stream_logs_no_traceback(
    fake_type: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake = fake_type(sleep=no_sleep)
    path = "/api/chat" if fake_type is FakeOllama else "/v1/chat/completions"
    body = {"model": _model(fake), "messages": [{"role": "user", "content": "hi"}], "stream": True}
    fake.hold(after_tokens=2)
    async with serve(fake) as url:
        async with aiohttp.ClientSession() as session:
            reply = await session.post(url + path, json=body)
            await reply.content.readline()  # the stream has started
            reply.close()  # the client leaves
        for _ in range(200):
            if fake.running() == 0:
                break
            await asyncio.sleep(0)
        fake.release()  # the fake writes on into the closed connection
        for _ in range(200):
            if fake.running() == 0 and fake.counters.completion_tokens >= 3:
                break
            await asyncio.sleep(0.005)
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
