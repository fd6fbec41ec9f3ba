"""Auto-detection order and its failure rules."""

from __future__ import annotations

import aiohttp
import pytest

from pharos.engine import BackendUnreachable, DetectionFailed, Kind, detect, resolve
from pharos.engine.detect import FINGERPRINT_PATHS
from tests.engine.server import NO_ANSWER, Reply, json_reply, serve, text_reply

NOT_FOUND = Reply(status=404)
SWAP_VERSION = '{"build_date":"2026-01-17T07:12:54Z","commit":"75fced5","version":"185"}'


def base(**overrides: Reply) -> dict[str, Reply]:
    routes = {path: NOT_FOUND for path in FINGERPRINT_PATHS}
    routes["/v1/models"] = json_reply('{"data":[{"id":"m"}]}')
    for key, reply in overrides.items():
        routes["/" + key.replace("__", "/")] = reply
    return routes


VLLM_METRICS = text_reply('vllm:num_requests_running{model_name="m"} 0.0\n')


@pytest.mark.parametrize(
    ("routes", "kind"),
    [
        (
            base(running=json_reply('{"running":[]}'), api__version=json_reply(SWAP_VERSION)),
            Kind.LLAMA_SWAP,
        ),
        (base(api__version=json_reply('{"version":"0.34.4"}')), Kind.OLLAMA),
        (base(props=json_reply('{"build_info":"b8772-x"}')), Kind.LLAMACPP),
        (base(version=json_reply('{"version":"0.30.0"}'), metrics=VLLM_METRICS), Kind.VLLM),
        (base(get_server_info=json_reply('{"version":"0.5.20"}')), Kind.SGLANG),
        (base(), Kind.OPENAI),
        # a /version without vLLM's metric is not vLLM
        (base(version=json_reply('{"version":"1"}'), metrics=text_reply("x 1\n")), Kind.OPENAI),
        # llama-swap v260's /api/version is rejected by the Ollama fingerprint
        (base(api__version=json_reply('{"version":"v260"}')), Kind.OPENAI),
        # an earlier match wins even when a later fingerprint path got no answer
        (base(props=json_reply('{"build_info":"b6602-x"}'), metrics=NO_ANSWER), Kind.LLAMACPP),
    ],
)
async def test_detection_order(routes: dict[str, Reply], kind: Kind) -> None:
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        assert await detect(session, engine.base_url) is kind
        assert engine.unexpected == []


@pytest.mark.parametrize(
    "routes",
    [
        base(metrics=NO_ANSWER),
        base(get_server_info=Reply(status=503)),
        {path: Reply(status=503) for path in (*FINGERPRINT_PATHS, "/v1/models")},
        # Ollama-looking digits while /running (llama-swap) got no answer: don't guess
        base(running=NO_ANSWER, api__version=json_reply('{"version":"185"}')),
    ],
)
async def test_detection_fails_instead_of_guessing(routes: dict[str, Reply]) -> None:
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        with pytest.raises(DetectionFailed):
            await detect(session, engine.base_url)
        with pytest.raises(DetectionFailed):
            await resolve(session, engine.base_url, Kind.AUTO)


async def test_detection_of_a_dead_backend_is_unreachable() -> None:
    async with serve({}) as engine:
        base_url = engine.base_url
    async with aiohttp.ClientSession() as session:
        with pytest.raises(BackendUnreachable):
            await detect(session, base_url, timeout_s=2.0)


async def test_resolve_auto_reuses_fingerprint_answers() -> None:
    routes = base(props=json_reply('{"build_info":"b8772-x","total_slots":2}'))
    routes["/slots"] = json_reply('[{"is_processing":false}]')
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, _ = await resolve(session, engine.base_url, Kind.AUTO)
        assert engine.hits["/props"] == 1 and engine.hits["/metrics"] == 1
    assert plan.kind is Kind.LLAMACPP
    assert plan.dropped["llamacpp-running"] == "404"
