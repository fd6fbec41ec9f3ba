"""State reuses each target's view between writes (issue 13); load an engine takes on behind
Pharos's back still reaches routing, and its end reaches the view."""

from __future__ import annotations

import asyncio

from pharos.fakeengine import FakeLlamaCpp, Ledger, no_sleep
from tests.proxy.rig import Backend, Rig, RigFactory

ONE_SLOT = Ledger(slots=1)


async def _direct_chat(r: Rig, url: str, model: str) -> int:
    """A client that talks to the engine itself, not through Pharos."""
    body = {"model": model, "messages": [{"role": "user", "content": "direct"}]}
    async with r.client.post(url + "/v1/chat/completions", json=body) as response:
        await response.read()
        return response.status


async def test_an_engine_busy_behind_phaross_back_is_avoided_until_pharos_sees_it_free(
    rig: RigFactory,
) -> None:
    busy, idle = FakeLlamaCpp(ledger=ONE_SLOT, sleep=no_sleep), FakeLlamaCpp(sleep=no_sleep)
    r = await rig(Backend(busy), Backend(idle))
    model = r.pharos.state.all_targets(r.now())[0].model
    assert r.view(r.urls[0], model).running == 0
    busy.hold()
    direct = asyncio.create_task(_direct_chat(r, r.urls[0], model))
    await r.until(
        lambda: r.view(r.urls[0], model).running == 1,
        "the direct request seen running by a scrape round",
    )
    for turn in range(3):
        status, reply = await r.chat(model, f"turn {turn}")
        assert status == 200, reply
    await r.until_done(3)
    assert {done.backend_url for done in r.done} == {r.urls[1]}
    busy.release()
    assert await direct == 200
    await r.until(
        lambda: r.view(r.urls[0], model).running == 0,
        "the direct request's end seen by a scrape round",
    )
