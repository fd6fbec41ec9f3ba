"""The generic OpenAI kind, live: llama-cpp-python[server] 0.3.36 (the same sdist as
llama-server b11312) serving SmolLM2 as `smollm2`.

It has no /health, no /metrics and no load signal at all, so detection falls to `openai`
and the plan is the model list alone. Pharos still serves every reply shape through it;
usage is metered where the engine reports it and unmetered (never 0) where it does not;
and with capacity unknown the saturation fallback (spec §8: saturated after 2 in flight)
holds a third request in Pharos's queue instead of stacking it on the engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pharos.engine import Kind, Signal, detect, resolve, scrape
from pharos.state import BackendSpec
from tests.live.capture import SHORT_PROMPT, SLOW_PROMPT
from tests.live.engines import (
    LLAMACPP_PY_VERSION,
    SERVED_MODEL,
    EngineMissing,
    RunningEngine,
    start_llamacpp_python,
)
from tests.live.pharos_rig import CHAT, LIVE_STATE, open_router, sse_events
from tests.live.proofs import Prove, source

pytestmark = pytest.mark.live

ENGINE = "llama-cpp-python"
RELEASE = f"v{LLAMACPP_PY_VERSION}"
COMPLETIONS = "/v1/completions"


@pytest.fixture(scope="module")
def generic(engine_logs: Path) -> Iterator[RunningEngine]:
    wanted = os.environ.get("PHAROS_LIVE_ENGINES")
    if wanted is not None and ENGINE not in {e.strip() for e in wanted.split(",")}:
        pytest.skip(f"PHAROS_LIVE_ENGINES excludes {ENGINE}")
    try:
        engine = start_llamacpp_python(engine_logs)
    except EngineMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        yield engine
    finally:
        engine.stop()


async def _status(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as reply:
        await reply.read()
        return reply.status


async def test_detection_falls_to_openai_and_the_plan_is_the_model_list(
    generic: RunningEngine, prove: Prove
) -> None:
    async with aiohttp.ClientSession() as session:
        # what makes it generic: neither a health path nor metrics
        assert await _status(session, generic.base_url + "/health") == 404
        assert await _status(session, generic.base_url + "/metrics") == 404
        assert await detect(session, generic.base_url, timeout_s=5.0) is Kind.OPENAI
        plan, resolved = await resolve(session, generic.base_url, Kind.AUTO, timeout_s=5.0)
        scraped = await scrape(plan, session, generic.base_url, timeout_s=5.0)
    assert plan.kind is Kind.OPENAI
    assert [p.name for p in plan.active] == ["openai-models"]
    assert resolved.models is not None and set(resolved.models) == {SERVED_MODEL}
    assert resolved.version is None  # no probe reads one: unknown, not ""
    assert dict(scraped.snapshot.loads) == {}  # running, waiting, capacity: unknown, never 0
    assert dict(scraped.failed) == {}
    prove(ENGINE, RELEASE, Signal.MODELS, source(scraped.snapshot, Signal.MODELS))


def _chat(stream: bool, tag: str) -> dict[str, Any]:
    return {
        "model": SERVED_MODEL,
        "stream": stream,
        "messages": [{"role": "user", "content": f"{SHORT_PROMPT} ({tag})"}],
        "max_tokens": 8,
        "temperature": 0,
    }


def _completion(stream: bool, tag: str) -> dict[str, Any]:
    return {
        "model": SERVED_MODEL,
        "stream": stream,
        "prompt": f"{SHORT_PROMPT} ({tag})",
        "max_tokens": 8,
        "temperature": 0,
    }


SHAPES = [  # (name, path, body): every reply shape a client asks an OpenAI server for
    ("chat", CHAT, _chat(False, "chat")),
    ("chat stream", CHAT, _chat(True, "chat stream")),
    ("completion", COMPLETIONS, _completion(False, "completion")),
    ("completion stream", COMPLETIONS, _completion(True, "completion stream")),
]


async def test_every_reply_shape_is_served_and_usage_is_unmetered_where_none_came(
    generic: RunningEngine,
) -> None:
    async with open_router([BackendSpec(generic.base_url)]) as router:
        await router.wait_up(SERVED_MODEL, [generic.base_url])
        bodies: list[bytes] = []
        for _, path, body in SHAPES:  # one at a time: the engine serves one at a time
            async with router.client.post(router.base_url + path, json=body) as reply:
                assert reply.status == 200, await reply.text()
                bodies.append(await reply.read())
        done = await router.wait_done(len(SHAPES))
        [row] = (await router.get_json("/usage?by=model"))["rows"]

    unmetered = 0
    for (name, _, body), raw, record in zip(SHAPES, bodies, done, strict=True):
        assert record.backend_url == generic.base_url
        if body["stream"]:
            events = sse_events(raw)
            assert events and events[-1] == "[DONE]", (name, raw[-200:])
            engine_usage = [e for e in events if isinstance(e, dict) and e.get("usage")]
        else:
            usage = json.loads(raw).get("usage")
            engine_usage = [{"usage": usage}] if usage else []
        print(
            f"{name}: metered={record.metered} usage={record.prompt_tokens}+"
            f"{record.completion_tokens} engine usage chunks={len(engine_usage)}"
        )
        if engine_usage:
            assert record.metered is True, name
            assert record.prompt_tokens == engine_usage[-1]["usage"]["prompt_tokens"], name
        else:
            # no usage from the engine: unmetered, and the token counts unknown, never 0
            assert record.metered is False, name
            assert record.prompt_tokens is None and record.completion_tokens is None, name
            unmetered += 1
    assert row["requests"] == len(SHAPES)
    assert row.get("unmetered", 0) == unmetered
    assert unmetered >= 1, "llama-cpp-python sends no usage chunk in its streams"


IMPATIENT = dataclasses.replace(LIVE_STATE, scrape_timeout_s=0.5)
"""A scrape gives up after 0.5 s, so the rounds of a reply of a second or more time out."""


async def test_a_generic_engine_busy_generating_stays_up_for_the_next_request(
    generic: RunningEngine,
) -> None:
    """It answers nothing, /v1/models included, while it generates (GET /v1/models timed out
    at 5 s mid-stream): the scrape rounds of a long reply time out, and the backend must
    stay up (state/scraper.py holds it while Pharos has requests in flight on it)."""
    slow = {
        **_chat(True, "busy"),
        "max_tokens": 200,  # over a second on 2 cores: a full round (every 1 s) times out
        # SmolLM2's <|endoftext|> (0) and <|im_end|> (2) banned: it stopped after ~30 tokens
        "logit_bias": {"0": -100, "2": -100},
        "messages": [{"role": "user", "content": SLOW_PROMPT}],
    }
    async with open_router([BackendSpec(generic.base_url)], state=IMPATIENT) as router:
        await router.wait_up(SERVED_MODEL, [generic.base_url])
        async with router.client.post(router.base_url + CHAT, json=slow) as reply:
            assert reply.status == 200
            raw = await reply.read()
            [status] = router.pharos.state.backends()
            assert status.up and status.reachable is not False, status
        async with router.client.post(router.base_url + CHAT, json=_chat(False, "next")) as reply:
            assert reply.status == 200, await reply.text()
        metrics = await router.get_text("/metrics")
    held = _decisions(metrics, "scrape", "busy_timeout") + _decisions(
        metrics, "resolve", "busy_timeout"
    )
    print(f"rounds that timed out mid-reply and held it up: {held}; reply {len(raw)} bytes")
    assert sse_events(raw)[-1] == "[DONE]"  # the stream was not cut
    assert held >= 1, "no round timed out during the reply: the test proved nothing"


def _decisions(metrics: str, stage: str, outcome: str) -> float:
    wanted = f'pharos_decisions_total{{outcome="{outcome}",stage="{stage}"}}'
    for line in metrics.splitlines():
        if line.startswith(wanted):
            return float(line.split()[-1])
    raise AssertionError(f"{wanted} is not exposed")


async def test_with_capacity_unknown_a_third_request_waits_in_pharos(
    generic: RunningEngine,
) -> None:
    slow = {
        "model": SERVED_MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": SLOW_PROMPT}],
        "max_tokens": 48,
        "temperature": 0,
    }

    async with open_router([BackendSpec(generic.base_url)]) as router:
        await router.wait_up(SERVED_MODEL, [generic.base_url])

        async def one() -> int:
            async with router.client.post(router.base_url + CHAT, json=slow) as reply:
                await reply.read()
                return reply.status

        statuses = await asyncio.gather(one(), one(), one())
        done = await router.wait_done(3)
    assert list(statuses) == [200, 200, 200]
    waits = sorted(d.queue_wait_s or 0.0 for d in done)
    print(f"queue waits {waits}")
    # two go straight to the engine (the fallback allows 2 in flight); the third waits in
    # Pharos until one of them is done, which takes a whole 48-token reply
    assert waits[1] < 0.2 < waits[2], waits
