"""Pharos in front of real engines (spec §14 layer 4): prefix routing, usage, a dying engine.

An in-process Pharos (real clock, short scrape intervals) routes to two llama-servers
b11312 (SmolLM2, -np 2 -c 4096 -t 1, both serving `smollm2`) and, for the vLLM cases, a
vLLM 0.32.0 whose `smollm2` Pharos aliases to `smollm2-vllm`.

vLLM gets its own client name rather than joining the llama.cpp pool: in one pool the
cost policy would weigh a 1-thread llama-server against vLLM on the same two cores, so
which engine a first turn lands on, and where the kill test's retry goes, would depend on
the machine's load; a separate name makes each assertion about one engine exact, and
checks live that an alias keeps two pools apart in one router.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
import pytest
from openai import AsyncOpenAI

from pharos.state import BackendSpec
from tests.live.capture import PROMPT_MARKER, SHORT_PROMPT, SLOW_PROMPT
from tests.live.engines import SERVED_MODEL, RunningEngine
from tests.live.pharos_engines import llamacpp_processing
from tests.live.pharos_rig import (
    CHAT,
    LiveRouter,
    content_of,
    conversation_turn_one,
    conversation_turn_two,
    decision,
    open_router,
    sse_events,
    until,
)

pytestmark = pytest.mark.live

VLLM_CLIENT_MODEL = "smollm2-vllm"


@dataclass(frozen=True)
class Pool:
    """The engines behind one client model name, and every backend the router is given."""

    engine: str
    model: str  # the name clients send
    urls: tuple[str, ...]  # the backends that serve `model`
    backends: tuple[BackendSpec, ...] = field(default=())
    other_pool: tuple[str, str, tuple[str, ...]] | None = None  # engine, model, urls


@pytest.fixture(params=["llamacpp", "vllm"])
def pool(request: pytest.FixtureRequest, llamacpp_pair: tuple[RunningEngine, ...]) -> Pool:
    llama_urls = tuple(engine.base_url for engine in llamacpp_pair)
    llama = tuple(BackendSpec(url) for url in llama_urls)
    if request.param == "llamacpp":
        return Pool("llamacpp", SERVED_MODEL, llama_urls, llama)
    vllm: RunningEngine = request.getfixturevalue("vllm_engine")
    aliased = BackendSpec(vllm.base_url, aliases={SERVED_MODEL: VLLM_CLIENT_MODEL})
    return Pool(
        "vllm",
        VLLM_CLIENT_MODEL,
        (vllm.base_url,),
        (*llama, aliased),
        other_pool=("llamacpp", SERVED_MODEL, llama_urls),
    )


async def wait_pools(router: LiveRouter, pool: Pool) -> None:
    await router.wait_up(pool.model, pool.urls)
    if pool.other_pool is not None:
        _, model, urls = pool.other_pool
        await router.wait_up(model, urls)
        assert router.up_urls(model) == set(urls), "the alias keeps vLLM out of the other pool"
    assert router.up_urls(pool.model) == set(pool.urls)


def sdk(router: LiveRouter) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=router.base_url + "/v1", api_key="pharos-live", max_retries=0, timeout=300.0
    )


async def test_a_repeated_long_prefix_lands_where_it_is_cached(pool: Pool) -> None:
    async with open_router(pool.backends) as router:
        await wait_pools(router, pool)
        client = sdk(router)
        turn_one = conversation_turn_one(f"prefix {pool.engine}")
        first = await client.chat.completions.create(
            model=pool.model,
            messages=turn_one,  # type: ignore[arg-type]
            max_tokens=8,
            temperature=0,
        )
        [done_one] = await router.wait_done(1)
        assert done_one.status == 200
        assert done_one.backend_url in pool.urls
        assert first.usage is not None and first.usage.prompt_tokens >= 500, first.usage
        assert decision(done_one, "prefix") == "miss", done_one.decisions

        # Both targets up again, so turn 2's target is the policy's choice among all of them.
        await wait_pools(router, pool)
        reply_text = first.choices[0].message.content or ""
        second = await client.chat.completions.create(
            model=pool.model,
            messages=conversation_turn_two(turn_one, reply_text),  # type: ignore[arg-type]
            max_tokens=8,
            temperature=0,
        )
        done_two = (await router.wait_done(2))[1]
        await client.close()

    assert second.usage is not None
    details = second.usage.prompt_tokens_details
    cached = details.cached_tokens if details is not None else None
    print(
        f"{pool.engine}: turn 1 on {done_one.backend_url} prompt {first.usage.prompt_tokens}; "
        f"turn 2 on {done_two.backend_url} prompt {second.usage.prompt_tokens} cached {cached}; "
        f"decisions {done_two.decisions}"
    )
    assert done_two.status == 200
    assert done_two.backend_url == done_one.backend_url, "turn 2 went where turn 1 is cached"
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    assert cached is not None and cached >= first.usage.prompt_tokens // 2, second.usage
    assert done_two.cached_tokens == cached, "Pharos read the engine's cached tokens"
    assert decision(done_two, "prefix") == "predicted_hit", done_two.decisions
    assert done_two.prefix_source == "local"


async def test_a_streamed_chat_has_its_usage_chunk_stripped_and_is_metered(pool: Pool) -> None:
    body = {
        "model": pool.model,
        "stream": True,
        "messages": [{"role": "user", "content": f"{SHORT_PROMPT} ({pool.engine})"}],
        "max_tokens": 8,
        "temperature": 0,
    }
    async with open_router(pool.backends) as router:
        await wait_pools(router, pool)
        async with router.client.post(router.base_url + CHAT, json=body) as reply:
            assert reply.status == 200, await reply.text()
            raw = await reply.read()
        [done] = await router.wait_done(1)
        by_model = (await router.get_json("/usage?by=model"))["rows"]
        by_key = (await router.get_json("/usage?by=key"))["rows"]

    events = sse_events(raw)
    assert events and events[-1] == "[DONE]", raw[-200:]
    assert all("usage" not in e for e in events if isinstance(e, dict)), "usage chunk reached us"
    assert all(e.get("choices") != [] for e in events if isinstance(e, dict))
    assert decision(done, "usage") == "pharos_asked", done.decisions
    assert done.backend_url in pool.urls
    assert done.metered is True
    assert done.prompt_tokens is not None and done.prompt_tokens > 0
    assert done.completion_tokens is not None and 1 <= done.completion_tokens <= 8

    # The same request straight to the engine, asking for usage itself: Pharos metered the
    # engine's own numbers.
    direct = {**body, "model": SERVED_MODEL, "stream_options": {"include_usage": True}}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{done.backend_url}{CHAT}", json=direct) as engine_reply,
    ):
        engine_events = sse_events(await engine_reply.read())
    engine_usage = next(e["usage"] for e in engine_events if isinstance(e, dict) and e.get("usage"))
    assert done.prompt_tokens == engine_usage["prompt_tokens"]

    print(f"{pool.engine}: metered {done.prompt_tokens}+{done.completion_tokens}; rows {by_model}")
    [row] = [r for r in by_model if r["model"] == pool.model]
    assert row["requests"] == 1
    assert row["prompt_tokens"] == done.prompt_tokens
    assert row["completion_tokens"] == done.completion_tokens
    assert row.get("unmetered", 0) == 0
    [key_row] = by_key
    assert key_row["key"] == "anonymous" and key_row["requests"] == 1


async def _read_until_content(reply: aiohttp.ClientResponse, received: bytearray) -> None:
    """Read the stream until the engine has sent a few content tokens."""
    while len([e for e in sse_events(bytes(received)) if content_of([e])]) < 3:
        chunk = await reply.content.readany()
        assert chunk, f"the stream ended before any content: {bytes(received)[-300:]!r}"
        received += chunk


async def test_a_llamacpp_server_killed_mid_stream_cuts_the_client_and_is_ejected(
    llamacpp_pair: tuple[RunningEngine, RunningEngine],
) -> None:
    urls = tuple(engine.base_url for engine in llamacpp_pair)
    slow = {
        "model": SERVED_MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": SLOW_PROMPT}],
        "max_tokens": 1500,
        "temperature": 0,
    }
    short = {
        "model": SERVED_MODEL,
        "messages": [{"role": "user", "content": f"{PROMPT_MARKER} after the kill. Say hi."}],
        "max_tokens": 4,
    }
    async with open_router([BackendSpec(url) for url in urls]) as router:
        await router.wait_up(SERVED_MODEL, urls)
        received = bytearray()
        async with router.client.post(router.base_url + CHAT, json=slow) as reply:
            assert reply.status == 200
            await _read_until_content(reply, received)
            processing = await asyncio.gather(
                *(asyncio.to_thread(llamacpp_processing, e) for e in llamacpp_pair)
            )
            assert processing in ([0, 1], [1, 0]), processing
            victim, survivor = (
                llamacpp_pair if processing[0] == 1 else (llamacpp_pair[1], llamacpp_pair[0])
            )
            victim.process.kill()  # SIGKILL, this one process
            await asyncio.to_thread(victim.process.wait, 10)
            with pytest.raises(aiohttp.ClientPayloadError):
                async for chunk in reply.content.iter_any():
                    received += chunk
        assert b"[DONE]" not in received, "a cut stream must not look complete"

        [cut] = await router.wait_done(1)
        assert cut.backend_url == victim.base_url
        assert decision(cut, "upstream") == "died_mid_reply", cut.decisions
        assert cut.metered is False
        ejected = router.backend(victim.base_url).ejected
        assert ejected is not None and ejected.startswith("died mid-reply"), ejected
        assert victim.base_url not in router.up_urls(SERVED_MODEL)

        async with router.client.post(router.base_url + CHAT, json=short) as reply:
            assert reply.status == 200, await reply.text()
            answer = await reply.json()
        assert answer["choices"][0]["message"]["content"]
        done = await router.wait_done(2)
        assert done[1].backend_url == survivor.base_url
        assert decision(done[1], "upstream") == "ok"

        [row] = (await router.get_json("/usage?by=model"))["rows"]
        page = await router.get_text("/status")
        await until(lambda: router.backend(victim.base_url).reachable is False, "a failed round")
        still = router.backend(victim.base_url).ejected

    print(f"cut {cut.decisions}; ejected {ejected!r}; next on {done[1].backend_url}; usage {row}")
    assert row["requests"] == 2 and row["unmetered"] == 1, row
    assert "died mid-reply" in page
    assert still == ejected, "an unanswered round does not clear the ejection"
