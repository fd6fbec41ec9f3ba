"""Real clients through Pharos (spec §14): the openai, ollama and anthropic SDKs encode bodies,
headers and errors their own way. Sync clients run in a thread: Pharos shares the loop."""

from __future__ import annotations

import asyncio

import anthropic
import ollama
import openai
import pytest

from pharos.fakeengine import FakeOllama, FakeVLLM, no_sleep
from tests.proxy.rig import SLOW_STATE, Backend, Rig, RigFactory

QWEN = "qwen2.5:0.5b"
VLLM_MODEL = "qwen2.5-0.5b"
MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [
    {"role": "user", "content": "Say hello."}
]


@pytest.fixture
async def sdk_rig(rig: RigFactory) -> Rig:
    return await rig(
        Backend(FakeOllama(sleep=no_sleep), capacity=2), Backend(FakeVLLM(sleep=no_sleep))
    )


def openai_sync(r: Rig) -> openai.OpenAI:
    return openai.OpenAI(base_url=r.base + "/v1", api_key="unused", max_retries=0)


async def test_openai_sync_streamed_and_not(sdk_rig: Rig) -> None:
    def run() -> tuple[str, str, int | None]:
        with openai_sync(sdk_rig) as client:
            whole = client.chat.completions.create(model=QWEN, messages=MESSAGES)
            stream = client.chat.completions.create(
                model=VLLM_MODEL, messages=MESSAGES, stream=True
            )
            chunks = list(stream)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            usage = [c.usage for c in chunks if c.usage is not None]
            assert whole.usage is not None
            return whole.choices[0].message.content or "", text, len(usage) or None

    whole, streamed, usage_chunks = await asyncio.to_thread(run)
    assert whole == streamed == "Hello! How can I assist you today?"
    assert usage_chunks is None  # Pharos asked for usage and stripped it: the client did not


async def test_openai_async_streamed_and_not_and_model_list(sdk_rig: Rig) -> None:
    async with openai.AsyncOpenAI(
        base_url=sdk_rig.base + "/v1", api_key="unused", max_retries=0
    ) as client:
        whole = await client.chat.completions.create(model=VLLM_MODEL, messages=MESSAGES)
        assert whole.choices[0].message.content == "Hello! How can I assist you today?"
        stream = await client.chat.completions.create(
            model=QWEN, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
        usage = [c.usage for c in chunks if c.usage is not None]
        assert len(usage) == 1 and usage[0].prompt_tokens > 0  # asked for: untouched
        models = [m.id async for m in client.models.list()]
        assert sorted(models) == sorted([QWEN, "all-minilm:22m", VLLM_MODEL])
        assert (await client.models.retrieve(QWEN)).id == QWEN
        completion = await client.completions.create(model=VLLM_MODEL, prompt="Once")
        assert completion.choices[0].text
        embedding = await client.embeddings.create(model="all-minilm:22m", input="a")
        assert len(embedding.data[0].embedding) > 0


async def test_openai_sdk_parses_pharos_errors(sdk_rig: Rig) -> None:
    async with openai.AsyncOpenAI(
        base_url=sdk_rig.base + "/v1", api_key="unused", max_retries=0
    ) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(model="no-such-model", messages=MESSAGES)
        assert missing.value.code == "model_not_found"
        with pytest.raises(openai.NotFoundError) as missing_model:
            await client.models.retrieve("no-such-model")
        assert missing_model.value.code == "model_not_found"
        with pytest.raises(openai.BadRequestError) as bad:
            await client.chat.completions.create(model="", messages=MESSAGES)
        assert bad.value.code == "missing_model"
        with pytest.raises(openai.BadRequestError) as bad_messages:
            await client.chat.completions.create(model=QWEN, messages="hi")  # type: ignore[arg-type]
        assert bad_messages.value.code == "invalid_request_error"


async def test_openai_sdk_sees_503_when_nothing_is_up(rig: RigFactory) -> None:
    fake = FakeVLLM(sleep=no_sleep)
    r = await rig(Backend(fake), state=SLOW_STATE)
    r.pharos.state.eject(r.urls[0], "test: down")  # no scrape round comes to un-eject it
    async with openai.AsyncOpenAI(
        base_url=r.base + "/v1", api_key="unused", max_retries=0
    ) as client:
        with pytest.raises(openai.InternalServerError) as err:
            await client.chat.completions.create(model=VLLM_MODEL, messages=MESSAGES)
    assert err.value.status_code == 503 and err.value.code == "backend_unavailable"


async def test_ollama_sdk(sdk_rig: Rig) -> None:
    client = ollama.AsyncClient(host=sdk_rig.base)
    reply = await client.chat(model=QWEN, messages=[{"role": "user", "content": "hi"}])
    assert reply.message.content == "Hello! How can I assist you today?" and reply.done
    assert reply.prompt_eval_count is not None and reply.prompt_eval_count > 0
    parts = [
        part
        async for part in await client.chat(
            model=QWEN, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    ]
    assert "".join(p.message.content or "" for p in parts) == reply.message.content
    assert parts[-1].done
    listed = await client.list()
    assert sorted(m.model or "" for m in listed.models) == ["all-minilm:22m", QWEN]
    running = await client.ps()
    assert [m.model for m in running.models] == [QWEN]
    with pytest.raises(ollama.ResponseError) as missing:
        await client.chat(model=VLLM_MODEL, messages=[{"role": "user", "content": "hi"}])
    assert missing.value.status_code == 404 and VLLM_MODEL in missing.value.error
    with pytest.raises(ollama.ResponseError) as unsupported:
        await client.pull("qwen2.5:7b")
    assert unsupported.value.status_code == 501


async def test_ollama_sdk_show(sdk_rig: Rig) -> None:
    shown = await ollama.AsyncClient(host=sdk_rig.base).show(QWEN)
    assert shown.details is not None and shown.details.family


async def test_anthropic_sdk_on_a_backend_without_messages_gets_route_not_served(
    sdk_rig: Rig,
) -> None:
    # Neither fake serves /v1/messages (Ollama 0.34.4's capture has no such route recorded).
    async with anthropic.AsyncAnthropic(
        base_url=sdk_rig.base, api_key="unused", max_retries=0
    ) as client:
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.create(
                model=QWEN, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
    assert refused.value.status_code == 400
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "error"  # Anthropic's error shape
    assert body["error"]["type"] == "invalid_request_error"
    assert "does not serve /v1/messages" in body["error"]["message"]
    assert sdk_rig.urls[0] in body["error"]["message"]
