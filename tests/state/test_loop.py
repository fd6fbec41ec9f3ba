"""The scraper loop: a thin jittered wrapper around run_round."""

from __future__ import annotations

import asyncio
import random

from pharos.clock import FakeClock
from pharos.engine.types import Residency
from pharos.state import State, StateOptions
from tests.state.fakes import (
    NO_SESSION,
    URL,
    FakeEngine,
    engine_fns,
    fake_aliases,
    fake_follow_line,
    snap,
    spec,
)


async def _run_loop(seed: int, rounds: int) -> tuple[list[float], list[str]]:
    clock = FakeClock()
    engine = FakeEngine()
    engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    delays: list[float] = []
    done = asyncio.Event()

    async def sleep(delay_s: float) -> None:
        delays.append(delay_s)
        clock.advance(delay_s)
        if len(delays) >= rounds:
            done.set()
            await asyncio.Event().wait()
        await asyncio.sleep(0)

    state = State(
        clock,
        NO_SESSION,
        StateOptions(),
        **engine_fns(engine),
        follow_line_fn=fake_follow_line,
        apply_aliases_fn=fake_aliases,
        rng=random.Random(seed),
        sleep=sleep,
    )
    state.set_backends([spec()])
    assert not state.ready
    await state.start()
    await asyncio.wait_for(done.wait(), timeout=10)
    assert state.ready
    await state.stop()
    return delays, [kind for _, kind in engine.calls]


async def test_loop_runs_rounds_with_jitter() -> None:
    delays, calls = await _run_loop(seed=7, rounds=11)
    assert calls == ["resolve"] + ["fast"] * 4 + ["full"] + ["fast"] * 4 + ["full"]
    assert all(0.9 <= delay <= 1.1 for delay in delays)
    assert len(set(delays)) > 1
    again, _ = await _run_loop(seed=7, rounds=11)
    assert again == delays  # the injected Random decides the jitter


def test_rounds_per_full_is_at_least_one() -> None:
    assert StateOptions(fast_interval_s=5.0, full_interval_s=1.0).rounds_per_full == 1
    assert StateOptions().rounds_per_full == 5


async def test_stop_without_start_is_harmless() -> None:
    state = State(
        FakeClock(),
        NO_SESSION,
        **engine_fns(FakeEngine()),
        follow_line_fn=fake_follow_line,
        apply_aliases_fn=fake_aliases,
    )
    await state.stop()
    assert not state.ready
