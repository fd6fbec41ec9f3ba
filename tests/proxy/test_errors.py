"""Client errors in the shape each API's clients parse; never a traceback (spec §9)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from pharos.fakeengine import FakeLlamaCpp, FakeOllama, FakeVLLM, Ledger, no_sleep
from pharos.proxy.app import ProxyOptions
from tests.proxy.rig import SLOW_STATE, Backend, Rig, RigFactory, kill

QWEN = "qwen2.5:0.5b"
OPENAI_PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]
OLLAMA_PATHS = ["/api/chat", "/api/generate", "/api/embed"]


async def send(r: Rig, path: str, data: bytes | AsyncIterator[bytes]) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    async with r.client.post(r.base + path, data=data, headers=headers) as response:
        return response.status, await response.read()


def openai_error(status: int, got: tuple[int, bytes], code: str) -> dict[str, object]:
    assert got[0] == status, got
    body = json.loads(got[1])
    assert set(body) == {"error"}
    error = body["error"]
    assert {"message", "type", "code"} <= set(error)
    assert isinstance(error["message"], str) and error["message"]
    assert error["code"] == code
    assert "Traceback" not in error["message"]
    return error


def ollama_error(status: int, got: tuple[int, bytes]) -> str:
    assert got[0] == status, got
    body = json.loads(got[1])
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"]
    return body["error"]


@pytest.fixture
async def ollama_rig(rig: RigFactory) -> Rig:
    return await rig(
        Backend(FakeOllama(sleep=no_sleep), capacity=2),
        proxy=ProxyOptions(max_body_bytes=4096, seed=1),
    )


BAD_BODIES = [
    (b'{"model": "qwen2.5:0.5b", "messages": [', "invalid_request_error"),
    (b"", "invalid_request_error"),
    (b"[1, 2]", "invalid_request_error"),
    (b'{"model": 5, "messages": []}', "invalid_request_error"),
    (b'{"model": "qwen2.5:0.5b", "messages": "hi"}', "invalid_request_error"),
    (b'{"messages": [{"role": "user", "content": "hi"}]}', "missing_model"),
    (b'{"model": "", "prompt": "hi"}', "missing_model"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES)
async def test_bad_bodies_are_400_in_both_shapes(ollama_rig: Rig, body: bytes, code: str) -> None:
    for path in OPENAI_PATHS:
        openai_error(400, await send(ollama_rig, path, body), code)
    for path in OLLAMA_PATHS:
        ollama_error(400, await send(ollama_rig, path, body))
    assert all(done.status == 400 for done in ollama_rig.done)


async def test_an_unknown_model_is_404_model_not_found(ollama_rig: Rig) -> None:
    body = b'{"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}'
    for path in OPENAI_PATHS:
        error = openai_error(404, await send(ollama_rig, path, body), "model_not_found")
        assert "no-such-model" in str(error["message"])
    for path in OLLAMA_PATHS:
        assert "no-such-model" in ollama_error(404, await send(ollama_rig, path, body))


async def test_a_body_too_large_is_413_with_or_without_a_length(ollama_rig: Rig) -> None:
    big = json.dumps({"model": QWEN, "prompt": "x" * 5000}).encode()

    async def chunked() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    openai_error(413, await send(ollama_rig, "/v1/completions", big), "request_too_large")
    openai_error(413, await send(ollama_rig, "/v1/completions", chunked()), "request_too_large")
    ollama_error(413, await send(ollama_rig, "/api/generate", big))


async def test_nothing_up_is_503(rig: RigFactory) -> None:
    fake = FakeOllama(sleep=no_sleep)
    r = await rig(Backend(fake, capacity=2))
    await kill(fake)
    await r.until(lambda: not r.backend_up(r.urls[0]), "the scraper seeing the backend down")
    body = json.dumps({"model": QWEN, "messages": [{"role": "user", "content": "hi"}]}).encode()
    error = openai_error(503, await send(r, "/v1/chat/completions", body), "backend_unavailable")
    assert error["type"] == "server_error"
    ollama_error(503, await send(r, "/api/chat", body))


async def test_a_full_queue_is_429_with_retry_after(rig: RigFactory) -> None:
    fake = FakeLlamaCpp(ledger=Ledger(slots=1), sleep=no_sleep)
    r = await rig(Backend(fake), queue_limit=1, state=SLOW_STATE)
    fake.hold()
    body = {"model": "qwen2.5-0.5b", "messages": [{"role": "user", "content": "hi"}]}
    running = asyncio.create_task(r.post("/v1/chat/completions", body))
    await r.until(lambda: r.inflight() == 1, "one request running")
    queued = asyncio.create_task(r.post("/v1/chat/completions", body))
    await r.until(lambda: r.pharos.sched.waiting_count() == 1, "one request queued")
    async with r.client.post(r.base + "/v1/chat/completions", json=body) as response:
        got = (response.status, await response.read())
        assert response.headers["Retry-After"] == "1"
    error = openai_error(429, got, "queue_full")
    assert error["type"] == "rate_limit_error"
    fake.release()
    assert [(await running)[0], (await queued)[0]] == [200, 200]


async def test_wrong_methods_and_unknown_paths_are_no_500(ollama_rig: Rig) -> None:
    for method, path in [
        ("GET", "/v1/chat/completions"),
        ("PUT", "/v1/models"),
        ("GET", "/v1/nothing"),
    ]:
        async with ollama_rig.client.request(method, ollama_rig.base + path) as response:
            assert 400 <= response.status < 500, (method, path, response.status)
    async with ollama_rig.client.get(ollama_rig.base + "/api/chat") as response:
        ollama_error(501, (response.status, await response.read()))


async def test_unknown_paths_and_wrong_methods_answer_in_the_api_error_shape(
    rig: RigFactory,
) -> None:
    r = await rig(Backend(FakeVLLM(sleep=no_sleep)))
    async with aiohttp.ClientSession() as client:
        async with client.get(f"{r.base}/v1/chat/completions") as response:
            assert response.status == 405
            body = await response.json()
            assert body["error"]["code"] == "method_not_allowed"
            assert "POST" in response.headers["Allow"]
        async with client.post(f"{r.base}/v1/nothing-here", json={}) as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == "not_found"
