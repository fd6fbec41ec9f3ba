"""TestFakeServesEveryRecordedReply: each fake serves every reply its pinned capture recorded,
with the capture's keys and line structure (spec §14 layer 3)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tools.captures import shared_captures as captures_root

from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeOllama, FakeVLLM, no_sleep, serve

ENGINES = captures_root() / "engines"
pytestmark = pytest.mark.skipif(not ENGINES.is_dir(), reason="no captures")

OLLAMA = ENGINES / "ollama/v0.34.4"
LLAMACPP = ENGINES / "llamacpp/v0.5.0"
VLLM = ENGINES / "vllm/v0.30.0"
SAY_HI = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]


def shape(value: Any) -> Any:
    """Keys (in order) all the way down; a list by its first item; every scalar alike."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return "*"


def line_shapes(body: bytes) -> list[Any]:
    """Per line: blank, [DONE], or the shape of its JSON."""
    out: list[Any] = []
    for line in body.split(b"\n"):
        payload = line[len(b"data: ") :] if line.startswith(b"data: ") else line
        if payload.startswith(b"{"):
            out.append(
                ("data" if line.startswith(b"data: ") else "json", shape(json.loads(payload)))
            )
        else:
            out.append(payload)
    return out


def recorded_status(capture: Path, name: str) -> int:
    for row in (capture / "streams/replies.tsv").read_text().splitlines():
        file, _, status = row.partition("\t")
        if file == name:
            return int(status)
    raise AssertionError(f"{name} not in replies.tsv")


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[int, bytes]:
    async with session.post(url, json=body) as response:
        return response.status, await response.read()


CHAT_STREAM = {"stream": True, "stream_options": {"include_usage": True}, "messages": SAY_HI}
CHAT_JSON = {"messages": SAY_HI, "max_tokens": 8}
COMPLETION = {"prompt": "Hello, my name is", "max_tokens": 8}

# (fake factory, model, capture, recorded file, route, request body)
CASES: list[tuple[str, Any, str, Path, str, str, dict[str, Any]]] = [
    ("ollama-sse", FakeOllama, "qwen2.5:0.5b", OLLAMA, "openai-chat.1.sse",
     "/v1/chat/completions", CHAT_STREAM),
    ("ollama-chat-json", FakeOllama, "qwen2.5:0.5b", OLLAMA, "openai-chat.json",
     "/v1/chat/completions", CHAT_JSON),
    ("ollama-completion", FakeOllama, "qwen2.5:0.5b", OLLAMA, "openai-completion.json",
     "/v1/completions", COMPLETION),
    ("ollama-embeddings", FakeOllama, "all-minilm:22m", OLLAMA, "openai-embeddings.json",
     "/v1/embeddings", {"input": "Hello world"}),
    ("ollama-native-chat", FakeOllama, "qwen2.5:0.5b", OLLAMA, "ollama-chat.1.ndjson",
     "/api/chat", {"messages": SAY_HI}),
    ("ollama-native-chat-json", FakeOllama, "qwen2.5:0.5b", OLLAMA, "ollama-chat.json",
     "/api/chat", {"messages": SAY_HI, "stream": False, "options": {"num_predict": 8}}),
    ("ollama-generate", FakeOllama, "qwen2.5:0.5b", OLLAMA, "ollama-generate.ndjson",
     "/api/generate", {"prompt": "Say hi", "options": {"num_predict": 8}}),
    ("ollama-embed", FakeOllama, "all-minilm:22m", OLLAMA, "ollama-embed.json",
     "/api/embed", {"input": "Hello world"}),
    ("llamacpp-sse", FakeLlamaCpp, "qwen2.5-0.5b", LLAMACPP, "openai-chat.1.sse",
     "/v1/chat/completions", CHAT_STREAM),
    ("llamacpp-chat-json", FakeLlamaCpp, "qwen2.5-0.5b", LLAMACPP, "openai-chat.json",
     "/v1/chat/completions", CHAT_JSON),
    ("llamacpp-completion", FakeLlamaCpp, "qwen2.5-0.5b", LLAMACPP, "openai-completion.json",
     "/v1/completions", COMPLETION),
    ("llamacpp-embeddings-refused", FakeLlamaCpp, "qwen2.5-0.5b", LLAMACPP,
     "openai-embeddings.json", "/v1/embeddings", {"input": "Hello"}),
    ("vllm-sse", FakeVLLM, "qwen2.5-0.5b", VLLM, "openai-chat.1.sse",
     "/v1/chat/completions", CHAT_STREAM),
    ("vllm-chat-json", FakeVLLM, "qwen2.5-0.5b", VLLM, "openai-chat.json",
     "/v1/chat/completions", CHAT_JSON),
    ("vllm-completion", FakeVLLM, "qwen2.5-0.5b", VLLM, "openai-completion.json",
     "/v1/completions", COMPLETION),
]  # fmt: skip


@pytest.mark.parametrize(
    ("factory", "model", "capture", "name", "route", "body"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_fake_serves_every_recorded_reply(
    session: aiohttp.ClientSession,
    factory: Any,
    model: str,
    capture: Path,
    name: str,
    route: str,
    body: dict[str, Any],
) -> None:
    fake: FakeEngine = factory(sleep=no_sleep)
    async with serve(fake) as url:
        status, served = await _post(session, url + route, {"model": model, **body})
    recorded = (capture / "streams" / name).read_bytes()
    if name.startswith("openai-") and name.endswith(".json"):
        assert status == recorded_status(capture, name)
    else:
        assert status == 200
    assert line_shapes(served) == line_shapes(recorded)


def test_every_recorded_reply_has_a_case() -> None:
    """A reply shape a pinned capture recorded, that no case above serves, fails here."""
    covered = {(case[3], case[4].replace(".1.", ".")) for case in CASES}
    for capture in (OLLAMA, LLAMACPP, VLLM):
        for path in (capture / "streams").iterdir():
            if path.name == "replies.tsv" or ".2." in path.name:
                continue
            assert (capture, path.name.replace(".1.", ".")) in covered, path
        for row in (capture / "streams/replies.tsv").read_text().splitlines():
            name = row.split("\t")[0]
            if not (capture / "streams" / name).exists():
                assert capture == VLLM and name == "openai-embeddings.json"


async def test_vllm_refuses_embeddings_as_recorded(session: aiohttp.ClientSession) -> None:
    """replies.tsv: 404 (the body was not recorded)."""
    async with serve(FakeVLLM(sleep=no_sleep)) as url:
        status, _ = await _post(session, url + "/v1/embeddings", {"model": "qwen2.5-0.5b"})
    assert status == recorded_status(VLLM, "openai-embeddings.json") == 404


async def test_without_include_usage_no_usage_chunk(session: aiohttp.ClientSession) -> None:
    for fake, model in ((FakeOllama(sleep=no_sleep), "qwen2.5:0.5b"),
                        (FakeLlamaCpp(sleep=no_sleep), "qwen2.5-0.5b"),
                        (FakeVLLM(sleep=no_sleep), "qwen2.5-0.5b")):  # fmt: skip
        async with serve(fake) as url:
            body = {"model": model, "messages": SAY_HI, "stream": True}
            status, served = await _post(session, url + "/v1/chat/completions", body)
        assert status == 200
        assert b'"usage"' not in served
        assert served.endswith(b"data: [DONE]\n\n")


async def test_unknown_model_gets_the_recorded_error(session: aiohttp.ClientSession) -> None:
    recorded = (ENGINES / "ollama/v0.33.3/streams/unknown-model.txt").read_text().split("\n")
    async with serve(FakeOllama(sleep=no_sleep)) as url:
        body = {"model": "no-such-model", "messages": SAY_HI}
        status, served = await _post(session, url + "/v1/chat/completions", body)
    assert status == int(recorded[-2]) == 404
    assert json.loads(served) == json.loads(recorded[0])


@pytest.mark.parametrize(
    ("factory", "capture_file", "path"),
    [
        (FakeOllama, OLLAMA / "idle/api_version", "/api/version"),
        (FakeOllama, OLLAMA / "idle/api_tags", "/api/tags"),
        (FakeOllama, OLLAMA / "busy/v1_models", "/v1/models"),
        (FakeLlamaCpp, LLAMACPP / "loaded/props", "/props"),
        (FakeLlamaCpp, LLAMACPP / "busy/v1_models", "/v1/models"),
        (FakeVLLM, VLLM / "busy/v1_models", "/v1/models"),
    ],
)
async def test_status_bodies_have_the_recorded_keys(
    session: aiohttp.ClientSession, factory: Any, capture_file: Path, path: str
) -> None:
    fake = factory(sleep=no_sleep)
    if isinstance(fake, FakeOllama):  # the capture lists one model
        fake.models = {"qwen2.5:0.5b": fake.models["qwen2.5:0.5b"]}
    async with serve(fake) as url, session.get(url + path) as response:
        served = await response.read()
    assert response.status == 200
    assert line_shapes(served) == line_shapes(await asyncio.to_thread(capture_file.read_bytes))


async def test_ollama_ps_loaded_like_the_capture(session: aiohttp.ClientSession) -> None:
    fake = FakeOllama(sleep=no_sleep)
    async with serve(fake) as url:
        async with session.get(url + "/api/ps") as response:
            assert json.loads(await response.read()) == {"models": []}
        await _post(session, url + "/api/chat", {"model": "qwen2.5:0.5b", "messages": SAY_HI})
        async with session.get(url + "/api/ps") as response:
            served = await response.read()
    assert line_shapes(served) == line_shapes((OLLAMA / "loaded/api_ps").read_bytes())


def _metric_names(text: str) -> list[str]:
    return [line.rpartition(" ")[0] for line in text.splitlines() if not line.startswith("#")]


@pytest.mark.parametrize(
    ("factory", "capture_file"),
    [(FakeLlamaCpp, LLAMACPP / "loaded/metrics"), (FakeVLLM, VLLM / "busy/metrics")],
)
async def test_metrics_series_are_recorded_series(
    session: aiohttp.ClientSession, factory: Any, capture_file: Path
) -> None:
    async with serve(factory(sleep=no_sleep)) as url, session.get(url + "/metrics") as response:
        served = await response.text()
    recorded = await asyncio.to_thread(capture_file.read_text)
    assert set(_metric_names(served)) <= set(_metric_names(recorded))
    comments = [line for line in served.splitlines() if line.startswith("#")]
    assert set(comments) <= set(recorded.splitlines())


async def test_llamacpp_slots_like_the_capture(session: aiohttp.ClientSession) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    async with serve(fake) as url:
        await _post(session, url + "/v1/chat/completions", {"model": "x", "messages": SAY_HI})
        async with session.get(url + "/slots") as response:
            slots = json.loads(await response.read())
    recorded = json.loads((LLAMACPP / "loaded/slots").read_bytes())
    # The capture's loaded state: one slot never used (4 keys), one that served a request.
    assert sorted(shape(s) for s in slots) == sorted(shape(s) for s in recorded)
