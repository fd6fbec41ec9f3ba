"""llama.cpp b11312's --cache-idle-slots (default on): idle slots go to the host cache whenever
a new task starts, so a slot overwritten without a save (picked by similarity, keeping over half
of it) has a copy there already."""

import asyncio
import dataclasses

import pytest

from pharos.sim.engines import Prompt, SimEngine
from pharos.sim.vloop import run_virtual
from tests.sim.test_engines import follow_up, llamacpp, prompt


@pytest.mark.parametrize(("idle_slots_saved", "cached"), [(True, 320), (False, 0)])
def test_an_idle_slot_saved_when_another_task_starts_restores_after_it_was_overwritten(
    idle_slots_saved: bool, cached: int
) -> None:
    async def main() -> int:
        spec = dataclasses.replace(
            llamacpp(slots=2, host_cache_tokens=10_000), cache_idle_slots=idle_slots_saved
        )
        engine = SimEngine(spec, asyncio.get_running_loop())
        mine = prompt(1, 2, 3)  # 300 tokens, slot A
        await engine.serve(mine)
        await engine.serve(prompt(7, 8))  # slot B; with the flag, slot A (idle) is saved now
        # shares 200 of mine's 320: picked by similarity, keeps 62% of slot A: no save
        overwrite = Prompt("m", (1, 2, 9), (100, 200, 300), 500, 5, 5)
        taker = asyncio.create_task(engine.serve(overwrite))
        await asyncio.sleep(3.0)  # decoding in slot A
        # slot B (7, 8) shares nothing: the LRU path restores the best match from host memory
        got = (await engine.serve(follow_up(mine, 4))).cached_tokens
        await taker
        return got

    assert run_virtual(main()) == cached
