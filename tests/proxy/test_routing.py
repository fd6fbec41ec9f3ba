"""Routing through the proxy follows residency, load and prefix (spec §7, §8, §14 layer 3)."""

from __future__ import annotations

import asyncio

from pharos.engine.types import Residency
from pharos.fakeengine import (
    FakeLlamaCpp,
    FakeModel,
    FakeOllama,
    Ledger,
    Sleep,
    no_sleep,
)
from tests.proxy.rig import Backend, RigFactory

QWEN = "qwen2.5:0.5b"
LLAMA = "llama3.2:1b"
ONE_SLOT = Ledger(slots=1)


def two_models() -> list[FakeModel]:
    return [FakeModel(QWEN), FakeModel(LLAMA, 1_321_098_329, 2_019_000_000)]


async def test_a_model_loaded_on_one_ollama_goes_there_not_to_the_cold_one(rig: RigFactory) -> None:
    warm, cold = FakeOllama(two_models(), sleep=no_sleep), FakeOllama(two_models(), sleep=no_sleep)
    r = await rig(Backend(warm, capacity=2), Backend(cold, capacity=2))
    async with r.client.post(r.urls[0] + "/api/generate", json={"model": QWEN}) as loaded:
        assert loaded.status == 200  # loads it on `warm` behind Pharos's back, as a user would
    await r.until_loaded(r.urls[0], QWEN)
    assert r.view(r.urls[1], QWEN).residency is Residency.COLD

    for turn in range(3):
        status, reply = await r.chat(QWEN, f"question {turn}")
        assert status == 200, reply
    assert {done.backend_url for done in r.done} == {r.urls[0]}
    assert (warm.counters.loads, cold.counters.loads) == (1, 0)
    assert cold.counters.by_path["/v1/chat/completions"] == 0


async def test_a_held_request_occupies_its_slot_and_the_next_goes_elsewhere(
    rig: RigFactory,
) -> None:
    fakes = [FakeLlamaCpp(ledger=ONE_SLOT, sleep=no_sleep) for _ in range(2)]
    r = await rig(Backend(fakes[0]), Backend(fakes[1]))
    model = r.pharos.state.all_targets(r.now())[0].model
    for fake in fakes:
        fake.hold()
    first = asyncio.create_task(r.chat(model, "first", stream=True))
    await r.until(lambda: sum(f.running() for f in fakes) == 1, "the first request running")
    busy = 0 if fakes[0].running() == 1 else 1
    second = asyncio.create_task(r.chat(model, "second", stream=True))
    await r.until(lambda: fakes[1 - busy].running() == 1, "the second request on the idle fake")
    assert fakes[busy].running() == 1 and fakes[busy].waiting() == 0
    for fake in fakes:
        fake.release()
    assert [(await first)[0], (await second)[0]] == [200, 200]


async def test_turn_two_goes_where_turn_one_left_its_prefix_and_reports_it_cached(
    rig: RigFactory,
) -> None:
    # llama.cpp reports its prefill time (timings.prompt_ms), so Pharos learns the ledger's
    # per-token cost although the fakes do not sleep; a fake that reported nothing would
    # teach it (rightly) that prefill is free, and the cache would not matter.
    fakes = [FakeLlamaCpp(sleep=no_sleep), FakeLlamaCpp(sleep=no_sleep)]
    r = await rig(Backend(fakes[0]), Backend(fakes[1]))
    model = "qwen2.5-0.5b"
    for conversation in range(4):
        system = f"conversation {conversation}: " + "You are a careful assistant. " * 150
        turn1 = [{"role": "system", "content": system}, {"role": "user", "content": "hello"}]
        status, reply1 = await r.chat(model, "", messages=turn1)
        assert status == 200, reply1
        turn2 = [
            *turn1,
            {"role": "assistant", "content": reply1["choices"][0]["message"]["content"]},
            {"role": "user", "content": "and then?"},
        ]
        status, reply2 = await r.chat(model, "", messages=turn2)
        assert status == 200, reply2
        await r.until_done(2 * (conversation + 1))
        first, second = r.done[-2:]
        assert second.backend_url == first.backend_url
        assert ("prefix", "predicted_hit") in second.decisions
        cached = reply2["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= len(system) // 4 - 16
        assert second.cached_tokens == cached


def slow_loads(ledger: Ledger, load_real_s: float) -> Sleep:
    """A fake's sleep where only a model load takes (real) time: with every delay free, a
    load would be free too, and Pharos would rightly learn that loading elsewhere costs
    nothing."""

    async def sleep(seconds_s: float) -> None:
        await asyncio.sleep(load_real_s if seconds_s == ledger.load_s else 0)

    return sleep


async def test_a_burst_on_a_cold_model_waits_behind_one_load(rig: RigFactory) -> None:
    ledger = Ledger()
    fakes = [
        FakeOllama(two_models(), ledger=ledger, sleep=slow_loads(ledger, 0.5)) for _ in range(2)
    ]
    r = await rig(Backend(fakes[0], capacity=2), Backend(fakes[1], capacity=2))
    assert {v.residency for v in r.views(QWEN)} == {Residency.COLD}
    for fake in fakes:
        fake.hold()
    burst = [asyncio.create_task(r.chat(QWEN, f"user {n}", stream=True)) for n in range(4)]
    await r.until(
        lambda: r.inflight() == 2 and r.pharos.sched.waiting_count() == 2,
        "two requests running and two waiting",
    )
    loading = 0 if fakes[0].counters.by_path["/v1/chat/completions"] else 1
    other = fakes[1 - loading]
    assert fakes[loading].counters.loads == 0, "the load should still be under way"
    await r.until(lambda: fakes[loading].counters.loads == 1, "the one load finished")
    await r.until_loaded(r.urls[loading], QWEN)
    seen_at = r.view(r.urls[loading], QWEN).last_fast_scrape_at
    assert seen_at is not None
    await r.until(
        lambda: (r.view(r.urls[loading], QWEN).last_fast_scrape_at or 0) > seen_at + 0.1,
        "more scrape rounds, each re-running the queue",
    )
    assert r.pharos.sched.waiting_count() == 2
    assert (other.counters.loads, other.counters.by_path["/v1/chat/completions"]) == (0, 0)
    for fake in fakes:
        fake.release()
    assert [(await task)[0] for task in burst] == [200] * 4
