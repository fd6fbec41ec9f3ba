"""Every route of spec §9's table, against fake engines on real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json

import aiohttp
import pytest
from aiohttp import web

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Config
from pharos.engine.types import Kind
from pharos.fakeengine import FakeModel, FakeOllama, FakeVLLM, no_sleep
from pharos.state import BackendSpec
from tests.proxy.rig import Backend, Rig, RigFactory

QWEN = "qwen2.5:0.5b"
LLAMA = "llama3.2:1b"
MINILM = "all-minilm:22m"
VLLM_ONLY = "vllm-only"


class OldOllama(FakeOllama):
    """An older Ollama: clients gate features on /api/version."""

    async def _version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": "0.30.0"})


@pytest.fixture
async def mixed(rig: RigFactory) -> Rig:
    first = FakeOllama(
        [FakeModel(QWEN), FakeModel(MINILM, 45_960_996, 50_000_000, embedding=True)], sleep=no_sleep
    )
    second = OldOllama([FakeModel(LLAMA, 1_321_098_329, 2_019_000_000)], sleep=no_sleep)
    return await rig(
        Backend(first, capacity=1),
        Backend(second, capacity=1),
        Backend(FakeVLLM(VLLM_ONLY, sleep=no_sleep)),
    )


async def get_json(r: Rig, path: str) -> tuple[int, object]:
    async with r.client.get(r.base + path) as response:
        return response.status, await response.json(content_type=None)


async def test_openai_inference_routes(mixed: Rig) -> None:
    status, chat = await mixed.chat(QWEN, "hi")
    assert status == 200 and chat["object"] == "chat.completion"
    status, chat = await mixed.chat(VLLM_ONLY, "hi")
    assert status == 200 and chat["model"] == VLLM_ONLY
    status, completion = await mixed.post("/v1/completions", {"model": LLAMA, "prompt": "Once"})
    assert status == 200 and completion["object"] == "text_completion"
    assert completion["usage"]["prompt_tokens"] >= 1
    status, embedding = await mixed.post("/v1/embeddings", {"model": MINILM, "input": ["a", "b"]})
    assert status == 200 and len(embedding["data"]) == 2
    await mixed.until_done(4)
    assert [d.backend_url for d in mixed.done] == [
        mixed.urls[0],
        mixed.urls[2],
        mixed.urls[1],
        mixed.urls[0],
    ]
    assert all(d.metered for d in mixed.done)


async def test_ollama_native_routes_go_to_ollama_only(mixed: Rig) -> None:
    status, reply = await mixed.post(
        "/api/chat",
        {"model": QWEN, "stream": False, "messages": [{"role": "user", "content": "x"}]},
    )
    assert status == 200 and reply["done"] is True and reply["message"]["content"]
    async with mixed.client.post(
        mixed.base + "/api/generate", json={"model": LLAMA, "prompt": "Once"}
    ) as response:
        lines = [json.loads(line) for line in (await response.read()).splitlines()]
    assert response.status == 200 and lines[-1]["done"] is True and len(lines) > 2
    status, reply = await mixed.post("/api/embed", {"model": MINILM, "input": "a"})
    assert status == 200 and len(reply["embeddings"]) == 1
    await mixed.until_done(3)
    assert all(d.metered for d in mixed.done)

    status, reply = await mixed.post("/api/chat", {"model": VLLM_ONLY, "messages": []})
    assert status == 404 and VLLM_ONLY in reply["error"]
    assert mixed.fakes[2].counters.requests == 0


async def test_model_lists_are_aggregated(mixed: Rig) -> None:
    status, models = await get_json(mixed, "/v1/models")
    assert status == 200
    assert isinstance(models, dict) and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == sorted([QWEN, MINILM, LLAMA, VLLM_ONLY])
    assert await get_json(mixed, f"/v1/models/{LLAMA}") == (
        200,
        {"id": LLAMA, "object": "model", "created": 0, "owned_by": "pharos"},
    )
    status, error = await get_json(mixed, "/v1/models/nope")
    assert status == 404 and isinstance(error, dict)
    assert error["error"]["code"] == "model_not_found"

    status, tags = await get_json(mixed, "/api/tags")
    assert status == 200 and isinstance(tags, dict)
    assert sorted(m["name"] for m in tags["models"]) == sorted([QWEN, MINILM, LLAMA])
    assert await get_json(mixed, "/api/ps") == (200, {"models": []})
    assert (await mixed.chat(LLAMA, "load it"))[0] == 200
    status, ps = await get_json(mixed, "/api/ps")
    assert isinstance(ps, dict) and [m["name"] for m in ps["models"]] == [LLAMA]


async def test_show_takes_no_slot(mixed: Rig) -> None:
    fake = mixed.fakes[0]
    fake.hold()
    held = asyncio.create_task(mixed.chat(QWEN, "occupy the only slot", stream=True))
    await mixed.until(lambda: mixed.inflight() == 1 and fake.running() == 1, "the slot taken")
    status, show = await mixed.post("/api/show", {"model": QWEN})
    assert status == 200 and "details" in show
    assert mixed.pharos.sched.waiting_count() == 0
    status, error = await mixed.post("/api/show", {"model": VLLM_ONLY})
    assert status == 404 and isinstance(error["error"], str)
    fake.release()
    assert (await held)[0] == 200


async def test_ollama_informational_routes(mixed: Rig) -> None:
    for method in ("HEAD", "GET"):
        async with mixed.client.request(method, mixed.base + "/") as response:
            assert response.status == 200
            assert await response.read() == (b"Ollama is running" if method == "GET" else b"")
    assert await get_json(mixed, "/api/version") == (200, {"version": "0.30.0"})
    for method, path in [
        ("POST", "/api/pull"),
        ("DELETE", "/api/delete"),
        ("POST", "/api/create"),
        ("POST", "/api/copy"),
    ]:
        async with mixed.client.request(method, mixed.base + path, json={}) as response:
            assert response.status == 501
            body = await response.json()
            assert set(body) == {"error"} and "does not manage models" in body["error"]


async def test_healthz_is_503_until_the_first_round_and_while_draining() -> None:
    gate = asyncio.Event()

    async def slow(_request: web.Request) -> web.Response:
        await gate.wait()
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", slow)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    pharos = Pharos(Config(), backends=[BackendSpec(url, Kind.OLLAMA)], options=RuntimeOptions())
    try:
        async with contextlib.AsyncExitStack() as stack:
            base = await stack.enter_async_context(running(pharos))
            client = await stack.enter_async_context(aiohttp.ClientSession())

            async def healthz() -> tuple[int, object]:
                async with client.get(base + "/healthz") as response:
                    return response.status, (await response.json())["status"]

            assert await healthz() == (503, "starting")
            gate.set()
            deadline = asyncio.get_running_loop().time() + 5
            while not pharos.state.ready:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.005)
            assert await healthz() == (200, "ok")
            pharos.flags.draining = True
            assert await healthz() == (503, "draining")
    finally:
        gate.set()
        await runner.cleanup()
