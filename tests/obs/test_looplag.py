"""The event-loop lag sampler (issue 13): it records how late its timer fired, never less than 0."""

from __future__ import annotations

import asyncio
import gc

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from pharos.obs.looplag import LoopLag, freeze_startup_objects


class SteppedLoop:
    """A clock and a sleep the test steps: each sleep wakes `late_s[i]` after it should."""

    def __init__(self, late_s: list[float]) -> None:
        self.t = 0.0
        self._late = list(late_s)
        self.done = asyncio.Event()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        if not self._late:
            self.done.set()
            await asyncio.Event().wait()  # parked until the test stops the sampler
        self.t += seconds + self._late.pop(0)


async def test_each_sample_is_how_late_the_timer_fired() -> None:
    registry = CollectorRegistry()
    # late by: nothing, 3 ms (a stall), and a clock reading that ran early (counted as 0)
    loop = SteppedLoop([0.0, 0.003, -0.0001])
    lag = LoopLag(registry, interval_s=0.05, now=loop.now, sleep=loop.sleep)
    lag.start()
    await asyncio.wait_for(loop.done.wait(), 5)
    await lag.stop()
    assert lag.samples == 3
    assert lag.stalls == 1
    assert lag.worst_s == pytest.approx(0.003)
    text = generate_latest(registry).decode()
    assert 'pharos_event_loop_lag_seconds_bucket{le="0.002"} 2.0' in text
    assert 'pharos_event_loop_lag_seconds_bucket{le="0.005"} 3.0' in text


async def test_a_real_stall_shows_up_as_lag() -> None:
    lag = LoopLag(CollectorRegistry(), interval_s=0.001)
    lag.start()
    await asyncio.sleep(0.01)
    block_until = asyncio.get_running_loop().time() + 0.02
    while asyncio.get_running_loop().time() < block_until:  # a 20 ms stall of the loop
        pass
    await asyncio.sleep(0.01)
    await lag.stop()
    assert lag.worst_s >= 0.015


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        LoopLag(CollectorRegistry(), interval_s=0)


def test_freezing_moves_startup_objects_out_of_collection() -> None:
    try:
        frozen = freeze_startup_objects()
        assert frozen > 0
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
