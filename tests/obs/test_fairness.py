"""The fair queue under contention (spec §8), end to end: grants follow the keys' weights."""

from __future__ import annotations

import asyncio

from pharos.fakeengine import FakeLlamaCpp, Ledger, no_sleep
from tests.obs.rig import BackendSpecYaml, KeySpec, StartRouter, wait_for

HEAVY = KeySpec("heavy", "sk-heavy-0001", weight=3)
LIGHT = KeySpec("light", "sk-light-0002", weight=1)
QUEUED_PER_KEY = 8
MODEL = "qwen2.5-0.5b"  # the llama.cpp fake's one model


async def test_grants_under_contention_follow_weights_3_to_1(start_router: StartRouter) -> None:
    engine = FakeLlamaCpp(ledger=Ledger(slots=1), sleep=no_sleep)
    grants: list[str] = []  # one slot: requests finish in the order they were granted
    router = await start_router(
        [BackendSpecYaml(engine, "llamacpp")],
        keys=[HEAVY, LIGHT],
        on_done=lambda done: grants.append(done.key),
    )
    views = router.pharos.state.all_targets(router.pharos.clock.now())
    assert [view.capacity for view in views] == [1], "the fake must report one slot"

    engine.hold()
    first = asyncio.create_task(router.chat(HEAVY.secret, MODEL, max_tokens=2))
    await wait_for(lambda: engine.running() == 1, "the first request never reached the engine")
    queued = [
        asyncio.create_task(router.chat(key.secret, MODEL, max_tokens=2))
        for _ in range(QUEUED_PER_KEY)
        for key in (HEAVY, LIGHT)
    ]
    await wait_for(
        lambda: router.pharos.sched.waiting_count() == 2 * QUEUED_PER_KEY,
        "the requests never queued",
    )
    engine.release()
    results = await asyncio.gather(first, *queued)
    assert all(status == 200 for status, _, _ in results)

    order = grants[1:]  # grants[0] is the first request, which never waited
    assert len(order) == 2 * QUEUED_PER_KEY
    while_both_wait = order[:8]  # the light key has waiters for at least its first 2 turns
    assert while_both_wait.count("heavy") == 6, order
    assert while_both_wait.count("light") == 2, order
    assert "light,light" not in ",".join(while_both_wait), order
    assert "heavy,heavy,heavy,heavy" not in ",".join(while_both_wait), order
