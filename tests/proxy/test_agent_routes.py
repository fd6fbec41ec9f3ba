"""Coding agents through Pharos (issue 12 Clients): Claude Code's /v1/messages (and its
count_tokens) and Codex-style /v1/responses, with the real anthropic and openai SDKs, in
front of fakes cloned from llama.cpp b11312 and vLLM 0.32.0 recordings.

Their replies are metered and count toward a key's daily quota; their errors come in
Anthropic's shape on /v1/messages, 401 and 429 included, naming `x-api-key`."""

from __future__ import annotations

import anthropic
import openai
import pytest

from pharos.config import Config
from pharos.config.schema import Key
from pharos.fakeengine import FakeLlamaCpp, FakeVLLM, no_sleep
from pharos.proxy.auth import hash_key
from tests.proxy.rig import Backend, Rig, RigFactory

MODEL = "qwen2.5-0.5b"  # both fakes' model
KEY = "sk-agent-test-key"
SAY = [{"role": "user", "content": "Say hello."}]


def _keyed(*, rpm: int | None = None, tokens_per_day: int | None = None) -> Config:
    key = Key(name="agent", sha256=hash_key(KEY), rpm=rpm, tokens_per_day=tokens_per_day)
    return Config(keys=(key,))


def _metered(r: Rig, route: str) -> list[tuple[int | None, int | None, int | None]]:
    return [
        (d.prompt_tokens, d.cached_tokens, d.completion_tokens)
        for d in r.done
        if d.route == route and d.metered
    ]


@pytest.mark.parametrize("fake_type", [FakeLlamaCpp, FakeVLLM])
async def test_the_anthropic_sdk_streamed_and_not_is_metered(
    rig: RigFactory, fake_type: type[FakeLlamaCpp] | type[FakeVLLM]
) -> None:
    fake = fake_type(sleep=no_sleep)
    r = await rig(Backend(fake))
    async with anthropic.AsyncAnthropic(base_url=r.base, api_key="x", max_retries=0) as client:
        whole = await client.messages.create(model=MODEL, max_tokens=64, messages=SAY)  # type: ignore[arg-type]
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=SAY) as stream:  # type: ignore[arg-type]
            streamed = await stream.get_final_message()
        counted = await client.messages.count_tokens(model=MODEL, messages=SAY)  # type: ignore[arg-type]
    text = whole.content[0].text  # type: ignore[union-attr]
    assert text == streamed.content[0].text == "Hello! How can I assist you today?"  # type: ignore[union-attr]
    assert streamed.usage.output_tokens == whole.usage.output_tokens > 0
    assert counted.input_tokens > 0
    await r.until_done(3)
    # Both replies metered, with the fake's own counts (the second one cached).
    assert len(_metered(r, "messages")) == 2
    prompt, _, completion = _metered(r, "messages")[1]
    assert prompt is not None and prompt >= counted.input_tokens
    assert completion == whole.usage.output_tokens
    assert fake.counters.prompt_tokens == sum(p or 0 for p, _, _ in _metered(r, "messages"))
    assert [d.route for d in r.done if d.route == "count_tokens"] == ["count_tokens"]


@pytest.mark.parametrize("fake_type", [FakeLlamaCpp, FakeVLLM])
async def test_the_openai_sdk_responses_streamed_and_not_is_metered(
    rig: RigFactory, fake_type: type[FakeLlamaCpp] | type[FakeVLLM]
) -> None:
    fake = fake_type(sleep=no_sleep)
    r = await rig(Backend(fake))
    async with openai.AsyncOpenAI(base_url=r.base + "/v1", api_key="x", max_retries=0) as client:
        whole = await client.responses.create(model=MODEL, input="Say hello.")
        stream = await client.responses.create(model=MODEL, input="Say hello.", stream=True)
        events = [event async for event in stream]
    assert whole.output_text == "Hello! How can I assist you today?"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text
    completed = [e for e in events if e.type == "response.completed"]
    assert completed and completed[0].response.usage is not None
    await r.until_done(2)
    metered = _metered(r, "responses")
    assert len(metered) == 2
    assert metered[0][2] == whole.usage.output_tokens if whole.usage else False
    assert fake.counters.completion_tokens == sum(c or 0 for _, _, c in metered)


async def test_messages_count_toward_the_daily_quota_then_429_in_anthropic_shape(
    rig: RigFactory,
) -> None:
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)), config=_keyed(tokens_per_day=1))
    async with anthropic.AsyncAnthropic(base_url=r.base, api_key=KEY, max_retries=0) as client:
        await client.messages.create(model=MODEL, max_tokens=8, messages=SAY)  # type: ignore[arg-type]
        await r.until_done(1)
        assert r.pharos.usage.tokens_today("agent") > 1  # the reply's tokens were counted
        with pytest.raises(anthropic.RateLimitError) as limited:
            await client.messages.create(model=MODEL, max_tokens=8, messages=SAY)  # type: ignore[arg-type]
    body = limited.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert "tokens for today" in body["error"]["message"]
    assert limited.value.response.headers.get("Retry-After") is not None


async def test_rpm_429_on_messages_is_anthropic_shaped(rig: RigFactory) -> None:
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)), config=_keyed(rpm=1))
    async with anthropic.AsyncAnthropic(base_url=r.base, api_key=KEY, max_retries=0) as client:
        await client.messages.create(model=MODEL, max_tokens=8, messages=SAY)  # type: ignore[arg-type]
        with pytest.raises(anthropic.RateLimitError) as limited:
            await client.messages.create(model=MODEL, max_tokens=8, messages=SAY)  # type: ignore[arg-type]
    assert isinstance(limited.value.body, dict)
    assert limited.value.body["error"]["type"] == "rate_limit_error"


# header sent -> what the 401 message names
@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"x-api-key": "wrong"}, "x-api-key"),  # the anthropic SDK's header
        ({}, "x-api-key"),  # nothing sent on an Anthropic route: name its header
        ({"Authorization": "Bearer wrong"}, "Authorization"),
    ],
)
async def test_a_401_on_messages_is_anthropic_shaped_and_names_the_header(
    rig: RigFactory, headers: dict[str, str], named: str
) -> None:
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)), config=_keyed())
    body = {"model": MODEL, "max_tokens": 8, "messages": SAY}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        status, reply = await r.post(path, body, headers=headers)
        assert status == 401
        assert reply["type"] == "error"
        assert reply["error"]["type"] == "authentication_error"
        assert f"`{named}`" in reply["error"]["message"]


async def test_the_anthropic_sdk_raises_its_typed_401_and_404(rig: RigFactory) -> None:
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)), config=_keyed())
    async with anthropic.AsyncAnthropic(base_url=r.base, api_key="bad", max_retries=0) as client:
        with pytest.raises(anthropic.AuthenticationError) as denied:
            await client.messages.create(model=MODEL, max_tokens=8, messages=SAY)  # type: ignore[arg-type]
    # anthropic 2.14.0 sends its api_key as `Authorization: Bearer` (checked: auth_headers),
    # so the 401 names that header; Claude Code's x-api-key is the parametrized case above.
    assert "`Authorization`" in str(denied.value)
    async with anthropic.AsyncAnthropic(base_url=r.base, api_key=KEY, max_retries=0) as client:
        with pytest.raises(anthropic.NotFoundError) as missing:
            await client.messages.create(model="no-such", max_tokens=8, messages=SAY)  # type: ignore[arg-type]
    assert isinstance(missing.value.body, dict)
    assert missing.value.body["error"]["type"] == "not_found_error"


async def test_openai_routes_keep_openai_errors_with_keys(rig: RigFactory) -> None:
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)), config=_keyed())
    status, reply = await r.chat(MODEL, "hi")
    assert status == 401 and reply["error"]["code"] == "invalid_api_key"
    assert "Authorization: Bearer" in reply["error"]["message"]


async def test_a_streamed_completion_is_metered_without_the_client_asking(
    rig: RigFactory,
) -> None:
    # vLLM reports usage on a streamed completion only when asked (recorded, 0.32.0).
    r = await rig(Backend(FakeVLLM(sleep=no_sleep)))
    body = {"model": MODEL, "prompt": "Once", "max_tokens": 4, "stream": True}
    async with r.client.post(r.base + "/v1/completions", json=body) as reply:
        raw = await reply.read()
    assert b'"choices":[]' not in raw and raw.endswith(b"data: [DONE]\n\n")  # stripped again
    await r.until_done(1)
    (done,) = r.done
    assert done.metered is True and done.completion_tokens == 4
    assert ("usage", "pharos_asked") in done.decisions
