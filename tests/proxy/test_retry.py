"""Retries, ejection and engines dying mid-reply (spec §9 "Retry once", §14 layer 3)."""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from pharos.fakeengine import FakeLlamaCpp, FakeOllama, no_sleep
from tests.proxy.rig import SLOW_STATE, Backend, Interceptor, Rig, RigFactory, kill

MODEL = "qwen2.5-0.5b"  # what the llama.cpp fake serves (its capture's model)
CHAT = "/v1/chat/completions"


def backend_status(r: Rig, url: str) -> tuple[bool, str | None]:
    (status,) = [b for b in r.pharos.state.backends() if b.url == url]
    return status.up, status.ejected


async def two_llamacpps(rig: RigFactory) -> tuple[Rig, list[FakeLlamaCpp], list[Interceptor]]:
    fakes = [FakeLlamaCpp(sleep=no_sleep), FakeLlamaCpp(sleep=no_sleep)]
    spies = [Interceptor(fake) for fake in fakes]
    r = await rig(Backend(fakes[0]), Backend(fakes[1]), state=SLOW_STATE)
    return r, fakes, spies


async def test_a_refused_connection_is_retried_on_another_target_and_ejects(
    rig: RigFactory,
) -> None:
    r, fakes, spies = await two_llamacpps(rig)
    await kill(fakes[0])  # the scraper has not noticed: only the proxy can find out
    for turn in range(4):
        status, reply = await r.chat(MODEL, f"turn {turn}")
        assert status == 200, reply
    assert {done.backend_url for done in r.done} == {r.urls[1]}
    assert len(spies[1].posted(CHAT)) == 4
    assert backend_status(r, r.urls[0]) == (False, "connect failed: ConnectFailed")
    refused = [d for d in r.done if ("upstream", "connect_failed") in d.decisions]
    assert len(refused) <= 1  # ejected at the first refusal: later requests never try it


async def test_a_5xx_is_retried_elsewhere_logged_cut_and_does_not_eject(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    r, _fakes, spies = await two_llamacpps(rig)
    message = "the server needs --jinja for tools: " + "x" * 300
    spies[0].refuse_with = (500, json.dumps({"error": {"code": 500, "message": message}}).encode())
    spies[1].refuse_with = None
    caplog.set_level(logging.WARNING, logger="pharos.proxy")
    for turn in range(4):
        status, reply = await r.chat(MODEL, f"turn {turn}")
        assert status == 200, reply
    refused = spies[0].posted(CHAT)
    assert refused, "the refusing engine got no request: the test proves nothing"
    assert len(spies[1].posted(CHAT)) == 4
    assert backend_status(r, r.urls[0]) == (True, None)
    warnings = [
        rec.getMessage()
        for rec in caplog.records
        if rec.name == "pharos.proxy" and rec.levelno == logging.WARNING
    ]
    assert len(warnings) == len(refused)
    for line in warnings:
        assert r.urls[0] in line and " 500: " in line
        assert line.endswith(" 500: type=- code=500")  # never the engine's text (issue 11)
        assert "jinja" not in line


async def test_a_503_is_retried_without_a_warning(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    r, _fakes, spies = await two_llamacpps(rig)
    spies[0].refuse_with = (503, b'{"error":{"code":503,"message":"Loading model"}}')
    caplog.set_level(logging.WARNING, logger="pharos.proxy")
    for turn in range(3):
        assert (await r.chat(MODEL, f"turn {turn}"))[0] == 200
    assert spies[0].posted(CHAT) and len(spies[1].posted(CHAT)) == 3
    assert not [rec for rec in caplog.records if rec.name == "pharos.proxy"]


async def test_with_nowhere_else_to_go_the_client_gets_the_engines_answer(
    rig: RigFactory,
) -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    spy = Interceptor(fake)
    refusal = b'{"error":{"code":500,"message":"tools need --jinja","type":"server_error"}}'
    spy.refuse_with = (500, refusal)
    r = await rig(Backend(fake), state=SLOW_STATE)
    async with r.client.post(r.base + CHAT, json={"model": MODEL, "messages": []}) as response:
        assert response.status == 500
        assert await response.read() == refusal
    assert len(spy.posted(CHAT)) == 1


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
async def test_a_404_on_a_coding_agent_route_is_retried_then_named(
    rig: RigFactory, path: str
) -> None:
    r, _fakes, spies = await two_llamacpps(rig)
    for spy in spies:  # engines without the route (llama.cpp b11312 serves both: recorded)
        spy.refuse_with = (404, b'{"error":{"code":404,"message":"File Not Found"}}')
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    status, reply = await r.post(path, body)
    assert status == 400
    error = reply["error"]
    assert error["type"] == "invalid_request_error"
    if path == "/v1/messages":  # Anthropic's shape
        assert reply["type"] == "error" and "does not serve /v1/messages" in error["message"]
    else:
        assert error["code"] == "route_not_served"
    assert [len(spy.posted(path)) for spy in spies] == [1, 1]
    assert any(url in error["message"] for url in r.urls)
    assert all(backend_status(r, url) == (True, None) for url in r.urls)


async def test_a_404_elsewhere_is_the_engines_answer_not_a_retry(rig: RigFactory) -> None:
    r, _fakes, spies = await two_llamacpps(rig)
    spies[0].refuse_with = spies[1].refuse_with = (404, b'{"error":"gone"}')
    status, reply = await r.chat(MODEL, "hi")
    assert (status, reply) == (404, {"error": "gone"})
    assert sum(len(spy.posted(CHAT)) for spy in spies) == 1


async def test_a_killed_engine_cuts_only_its_stream_without_retry_and_is_ejected(
    rig: RigFactory,
) -> None:
    r, fakes, spies = await two_llamacpps(rig)
    for fake in fakes:
        fake.hold(after_tokens=2)
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "long"}]}
    first = await r.client.post(r.base + CHAT, json=body)
    head = await first.content.readuntil(b"\n\n")  # the first event reached the client
    assert head.startswith(b"data: ")
    victim = 0 if fakes[0].running() == 1 else 1
    survivor = 1 - victim
    second = await r.client.post(
        r.base + CHAT, json=body | {"messages": [{"role": "user", "content": "other"}]}
    )
    await r.until(lambda: fakes[survivor].running() == 1, "the second stream on the other fake")

    await kill(fakes[victim])
    with pytest.raises(aiohttp.ClientPayloadError):
        await first.content.read()
    first.release()
    assert len(spies[survivor].posted(CHAT)) == 1  # no retry after the first byte
    assert backend_status(r, r.urls[victim]) == (False, "died mid-reply: ReplyCut")

    fakes[survivor].release()
    rest = await second.content.read()
    assert rest.endswith(b"data: [DONE]\n\n")
    second.release()
    status, reply = await r.chat(MODEL, "after")
    assert status == 200, reply
    await r.until_done(3)
    assert r.done[-1].backend_url == r.urls[survivor]
    died = [d for d in r.done if ("upstream", "died_mid_reply") in d.decisions]
    assert len(died) == 1 and died[0].metered is False
    await r.until(lambda: r.inflight() == 0, "every slot back")


async def test_an_ollama_native_stream_cut_mid_reply_never_ends_cleanly(rig: RigFactory) -> None:
    fake = FakeOllama(sleep=no_sleep)
    r = await rig(Backend(fake, capacity=2), state=SLOW_STATE)
    fake.hold(after_tokens=1)
    body = {"model": "qwen2.5:0.5b", "messages": [{"role": "user", "content": "hi"}]}
    response = await r.client.post(r.base + "/api/chat", json=body)
    first_line = await response.content.readline()
    assert json.loads(first_line)["done"] is False
    await kill(fake)
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.content.read()
    response.release()
    await r.until(lambda: r.inflight() == 0, "the slot back")


async def test_a_killed_fake_refuses_pooled_connections_too(rig: RigFactory) -> None:
    r, fakes, _spies = await two_llamacpps(rig)
    await fakes[0].kill()
    for turn in range(4):
        assert (await r.chat(MODEL, f"turn {turn}"))[0] == 200
    assert backend_status(r, r.urls[0]) == (False, "connect failed: ConnectFailed")
