"""Simulated engines behave as the measured ones do (spec §14 assumptions ledger)."""

import asyncio
from collections.abc import Sequence

import pytest

from pharos.sim.engines import Flavour, HostSpec, Prompt, Served, SimEngine
from pharos.sim.vloop import run_virtual


def prompt(*links: int, tokens_each: int = 100, completion: int = 10, model: str = "m") -> Prompt:
    return Prompt(
        model=model,
        hashes=tuple(links),
        cum_tokens=tuple(tokens_each * (i + 1) for i in range(len(links))),
        completion_tokens=completion,
        reply_hash=hash(links) & 0xFFFF_FFFF,
        reply_tokens=20,
    )


def follow_up(previous: Prompt, *links: int) -> Prompt:
    """The next turn: the previous prompt, its reply, then new messages."""
    base = (*previous.hashes, previous.reply_hash)
    cum = (*previous.cum_tokens, previous.tokens + previous.reply_tokens)
    extra = tuple(cum[-1] + 100 * (i + 1) for i in range(len(links)))
    return Prompt(previous.model, (*base, *links), (*cum, *extra), 10, 99, 20)


async def _serve_all(engine: SimEngine, prompts: Sequence[Prompt]) -> list[Served]:
    return list(await asyncio.gather(*(engine.serve(p) for p in prompts)))


def llamacpp(*, slots: int = 2, host_cache_tokens: int = 0) -> HostSpec:
    return HostSpec(
        "e",
        Flavour.LLAMACPP,
        slots=slots,
        prefill_s_per_token=0.01,
        decode_s_per_token=0.01,
        contention=0.0,
        host_cache_tokens=host_cache_tokens,
    )


def test_a_follow_up_turn_finds_the_previous_prompt_and_reply_cached_in_its_slot() -> None:
    async def main() -> tuple[Served, Served]:
        engine = SimEngine(llamacpp(), asyncio.get_running_loop())
        first = prompt(1, 2)
        served_first = await engine.serve(first)
        return served_first, await engine.serve(follow_up(first, 3))

    first, second = run_virtual(main())
    assert first.cached_tokens == 0
    assert first.first_token_s == pytest.approx(200 * 0.01)
    assert second.cached_tokens == 220  # 2 messages + the reply
    assert second.first_token_s == pytest.approx(100 * 0.01)


def test_a_request_beside_the_one_holding_its_prefix_prefills_it_in_full() -> None:
    """Per-slot caching: the prompt is cached for others only once its request ends."""

    async def main() -> list[Served]:
        engine = SimEngine(llamacpp(), asyncio.get_running_loop())
        return await _serve_all(engine, [prompt(1, 2), prompt(1, 2, 3)])

    assert [s.cached_tokens for s in run_virtual(main())] == [0, 0]


def test_a_third_request_on_two_slots_waits_and_the_engine_reports_it() -> None:
    async def main() -> tuple[list[Served], tuple[int, int]]:
        engine = SimEngine(llamacpp(), asyncio.get_running_loop())
        tasks = [asyncio.create_task(engine.serve(prompt(i))) for i in (1, 2, 3)]
        await asyncio.sleep(0.5)
        counts = engine.counts()
        return list(await asyncio.gather(*tasks)), (counts.running, counts.waiting)

    served, (running, waiting) = run_virtual(main())
    assert (running, waiting) == (2, 1)
    # the first two prompts share one batch (200 tokens, 2 s, their first tokens), then 9
    # decode steps of two streams at 1.79x 10 ms each
    assert served[2].engine_waited_s == pytest.approx(2.0 + 9 * 0.01 * 1.79)


def test_host_memory_cache_keeps_a_prompt_whose_slot_was_reused() -> None:
    """llama.cpp --cache-ram: with it, a user whose slot another took still finds its prefix."""

    async def run(host_cache_tokens: int) -> int:
        engine = SimEngine(
            llamacpp(slots=1, host_cache_tokens=host_cache_tokens), asyncio.get_running_loop()
        )
        mine = prompt(1, 2)
        await engine.serve(mine)
        await engine.serve(prompt(7, 8))
        return (await engine.serve(follow_up(mine, 3))).cached_tokens

    assert run_virtual(run(0)) == 0
    assert run_virtual(run(10_000)) == 220


def test_a_slot_is_saved_to_the_host_cache_when_taken_not_when_its_new_request_ends() -> None:
    """llama.cpp's get_available_slot saves the slot before loading the new prompt, so the
    user whose slot another request took finds its prefix while that request still runs."""

    async def main() -> int:
        engine = SimEngine(llamacpp(slots=2, host_cache_tokens=10_000), asyncio.get_running_loop())
        mine = prompt(1, 2)
        await engine.serve(mine)  # slot A holds mine; slot B is empty
        # shares message 1 (half of it): picked by similarity, and keeps under half of slot A
        long_reply = Prompt("m", (1, 9), (100, 200), 500, 5, 5)
        taker = asyncio.create_task(engine.serve(long_reply))
        await asyncio.sleep(3.0)  # the taker is decoding in slot A
        cached = (await engine.serve(follow_up(mine, 3))).cached_tokens
        await taker
        return cached

    assert run_virtual(main()) == 220


# shared_tokens: of the new prompt, held by the one used slot; cached: what the engine reused
@pytest.mark.parametrize(
    ("shared_tokens", "cached"),
    [
        (5, 0),  # 5 of 105 tokens: under the 0.1 similarity floor, the LRU (empty) slot is used
        (50, 50),  # 50 of 150: picked by similarity, the 50 shared tokens are reused
    ],
)
def test_a_slot_is_picked_for_its_prefix_only_above_the_similarity_floor(
    shared_tokens: int, cached: int
) -> None:
    async def main() -> int:
        engine = SimEngine(llamacpp(slots=2), asyncio.get_running_loop())
        await engine.serve(Prompt("m", (1, 2), (shared_tokens, 400), 1, 3, 1))
        new = Prompt("m", (1, 7), (shared_tokens, shared_tokens + 100), 1, 4, 1)
        return (await engine.serve(new)).cached_tokens

    assert run_virtual(main()) == cached


def ollama(memory_gb: float) -> HostSpec:
    return HostSpec(
        "o",
        Flavour.OLLAMA,
        models=("a", "b"),
        model_gb=(4.0, 4.0),
        memory_gb=memory_gb,
        load_s=8.0,
        prefill_s_per_token=0.001,
        decode_s_per_token=0.001,
        contention=0.0,
    )


def test_a_burst_on_a_cold_model_waits_behind_one_load() -> None:
    async def main() -> tuple[list[Served], int]:
        engine = SimEngine(ollama(9.0), asyncio.get_running_loop())
        served = await _serve_all(engine, [prompt(i, model="a") for i in (1, 2)])
        return served, engine.loads

    served, loads = run_virtual(main())
    assert loads == 1
    assert all(s.load_s == pytest.approx(8.0) for s in served)


def test_a_load_evicts_an_idle_model_and_never_one_with_requests_running() -> None:
    async def main() -> tuple[float, int, dict[str, bool]]:
        engine = SimEngine(ollama(5.0), asyncio.get_running_loop())
        long_a = asyncio.create_task(
            engine.serve(prompt(1, tokens_each=1000, completion=20_000, model="a"))
        )
        await asyncio.sleep(10.0)  # a is loaded and busy for 20 s of decode
        b = await engine.serve(prompt(2, model="b"))
        await long_a
        return b.first_token_s, engine.loads, engine.counts().loaded

    b_first_token_s, loads, loaded = run_virtual(main())
    assert b_first_token_s > 20.0  # waited for a's request to end before unloading it
    assert loads == 2
    assert loaded == {"a": False, "b": True}


def test_a_shared_cache_engine_credits_a_prefix_at_the_end_of_its_prefill() -> None:
    """vLLM shares one cache (assumed): a request beside another already finds its prefix."""

    async def main() -> list[Served]:
        engine = SimEngine(
            HostSpec(
                "v", Flavour.VLLM, prefill_s_per_token=0.01, decode_s_per_token=0.1, contention=0.0
            ),
            asyncio.get_running_loop(),
        )
        first = asyncio.create_task(engine.serve(prompt(1, 2, completion=100)))
        await asyncio.sleep(5.0)  # first's prefill (2 s) is over; it is decoding
        second = await engine.serve(prompt(1, 2, 3))
        return [await first, second]

    assert [s.cached_tokens for s in run_virtual(main())] == [0, 200]


# Ollama 0.34.4 starts one llama-server per loaded model with `-np 2` (OLLAMA_NUM_PARALLEL:2,
# its own `-c 8192` context and prompt cache): captures/engines/ollama/v0.34.4/engine.log,
# "starting llama-server" and "loaded runners" lines. So slots and cache are per model.


def test_ollama_runs_each_loaded_model_on_slots_of_its_own() -> None:
    async def main() -> tuple[list[Served], tuple[int, int]]:
        engine = SimEngine(ollama(9.0), asyncio.get_running_loop())
        long_a = [
            asyncio.create_task(engine.serve(prompt(i, completion=20_000, model="a")))
            for i in (1, 2)
        ]
        await asyncio.sleep(10.0)  # a loaded, both of its slots decoding for 20 s
        b = await _serve_all(engine, [prompt(i, model="b") for i in (3, 4)])
        counts = engine.counts()
        await asyncio.gather(*long_a)
        return b, (counts.running, counts.waiting)

    b, (running, waiting) = run_virtual(main())
    assert [s.engine_waited_s for s in b] == [0.0, 0.0]
    assert all(s.first_token_s < 10.0 for s in b)  # b's load and prefill, not a's 20 s decode
    assert (running, waiting) == (2, 0)  # once b is done: a's two


def test_ollama_keeps_a_models_prompt_cache_while_another_model_serves() -> None:
    async def main() -> int:
        engine = SimEngine(ollama(9.0), asyncio.get_running_loop())
        mine = prompt(1, 2, model="a")
        await engine.serve(mine)
        await _serve_all(engine, [prompt(i, model="b") for i in (3, 4)])
        return (await engine.serve(follow_up(mine, 5))).cached_tokens

    assert run_virtual(main()) == 220


def test_unloading_an_ollama_model_drops_its_prompt_cache() -> None:
    async def main() -> tuple[int, int]:
        engine = SimEngine(ollama(5.0), asyncio.get_running_loop())  # fits one model
        mine = prompt(1, 2, model="a")
        await engine.serve(mine)
        await engine.serve(prompt(3, model="b"))  # unloads a
        again = await engine.serve(follow_up(mine, 5))
        return again.cached_tokens, engine.loads

    assert run_virtual(main()) == (0, 3)


def test_ollama_picks_a_slot_as_its_llama_server_does() -> None:
    """The 0.34.4 log shows llama-server's get_available_slot ("checking sim = 0.001 (3/3209)
    > 0.100", then "selected slot by LRU"): a 5-token match of 105 takes the empty slot."""

    async def main() -> int:
        engine = SimEngine(ollama(9.0), asyncio.get_running_loop())
        await engine.serve(Prompt("a", (1, 2), (5, 400), 1, 3, 1))
        return (await engine.serve(Prompt("a", (1, 7), (5, 105), 1, 4, 1))).cached_tokens

    assert run_virtual(main()) == 0


def batching(*, decode_s_per_token: float = 0.01) -> HostSpec:
    """One llama-server: its slots share one batch loop (prefill 10 ms a token)."""
    return HostSpec(
        "e",
        Flavour.LLAMACPP,
        prefill_s_per_token=0.01,
        decode_s_per_token=decode_s_per_token,
        host_cache_tokens=0,
    )


def test_a_prefill_beside_a_decoding_request_takes_its_own_time_and_stalls_the_decoder() -> None:
    """llama-server puts a decoding slot's next token and a new prompt in one batch: the
    prompt runs at its own speed (1 s for 100 tokens, + the decoder's token) and the decoder
    waits for the whole batch (A: 1 s prefill, 499 steps of 10 ms, +1 s stalled)."""

    async def main() -> tuple[Served, Served]:
        engine = SimEngine(batching(), asyncio.get_running_loop())
        decoding = asyncio.create_task(engine.serve(prompt(1, completion=500)))
        await asyncio.sleep(2.0)
        beside = await engine.serve(prompt(2, completion=1))
        return await decoding, beside

    decoder, beside = run_virtual(main())
    assert beside.prefill_s == pytest.approx(1.01)
    assert beside.first_token_s == pytest.approx(1.01, abs=0.011)
    assert decoder.duration_s == pytest.approx(1.0 + 4.99 + 1.01, abs=0.011)


def test_a_prompt_sent_while_another_prefills_waits_for_that_batch_then_runs_alone() -> None:
    """A prompt that arrives while a batch is being computed joins the next one: B (100
    tokens, 1 s alone) sent 1 s into A's 3 s prefill waits 2 s, then prefills beside A's
    decoding token; its prompt_ms is its own batch, the wait shows only in its TTFT."""

    async def main() -> tuple[Served, Served]:
        engine = SimEngine(batching(), asyncio.get_running_loop())
        first = asyncio.create_task(engine.serve(prompt(1, 2, 3, completion=50)))
        await asyncio.sleep(1.0)
        second = await engine.serve(prompt(4, completion=1))
        return await first, second

    first, second = run_virtual(main())
    assert first.prefill_s == pytest.approx(3.0)
    assert second.prefill_s == pytest.approx(1.01)
    assert second.first_token_s == pytest.approx(2.0 + 1.01)


def test_two_prompts_sent_at_once_share_one_batch_and_get_their_first_tokens_together() -> None:
    async def main() -> list[Served]:
        engine = SimEngine(batching(), asyncio.get_running_loop())
        return await _serve_all(engine, [prompt(1, completion=1), prompt(2, completion=1)])

    served = run_virtual(main())
    assert [s.prefill_s for s in served] == pytest.approx([2.0, 2.0])
    assert [s.first_token_s for s in served] == pytest.approx([2.0, 2.0])


def test_two_streams_decoding_together_step_slower_than_one() -> None:
    """ENGINE-FACTS (b11312, SmolLM2): decode ~100 tok/s for one stream, ~112 for two
    together, so a step of two takes 2 / 1.12 = 1.79x a step of one."""

    async def main() -> list[Served]:
        engine = SimEngine(batching(), asyncio.get_running_loop())
        return await _serve_all(engine, [prompt(1, completion=101), prompt(2, completion=101)])

    served = run_virtual(main())
    assert [s.duration_s for s in served] == pytest.approx([2.0 + 100 * 0.01 * 1.79] * 2)
