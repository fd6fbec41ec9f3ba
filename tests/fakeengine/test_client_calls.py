"""Every client call a user tries against the demo behaves like a real engine: the fakes
stream /v1/completions in the shape each engine recorded (tests/captures/routes), and the
fake Ollama serves the older /api/embeddings the ollama SDK's `embeddings()` calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import ollama
import openai
import pytest

from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeOllama, FakeVLLM, no_sleep, serve
from pharos.fakeengine.captures import repo_captures_root
from tests.fakeengine.test_replies import line_shapes

ROUTES = repo_captures_root() / "routes"


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
